package audio

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"time"
)

// sniff reads the duration of the two containers most recordings arrive
// in (voice notes are Ogg/Opus, dictaphones and our own tests write WAV)
// from their headers, without starting ffprobe: the process alone costs
// more than the rest of a short job's conversion. Anything it is not sure
// of — another container, another codec, an odd header — is left to
// ffprobe (ok is false), so its verdicts and messages stay the same.
func sniff(path string) (info Info, ok bool) {
	info, _, ok = Sniff(path)
	return info, ok
}

// Sniff reads a recording's container, codec and duration from its
// headers as the pipeline's probe does, without starting ffprobe, and
// whether the container ends early: an Ogg stream without its last page, a
// WAV whose data stops short of its declared size. Such a file holds a
// recording that was cut off (a recorder killed, a sync interrupted) and
// Duration is what it holds. ok is false for containers it does not read.
func Sniff(path string) (info Info, cutShort, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return Info{}, false, false
	}
	defer func() { _ = f.Close() }() // only read
	st, err := f.Stat()
	if err != nil {
		return Info{}, false, false
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	switch {
	case len(head) >= 12 && string(head[:4]) == "RIFF" && string(head[8:12]) == "WAVE":
		info, cutShort, ok = sniffWAV(f, st.Size())
	case len(head) >= 4 && string(head[:4]) == "OggS":
		info, cutShort, ok = sniffOgg(f, head, st.Size())
	}
	if !ok || info.Duration <= 0 {
		return Info{}, false, false
	}
	info.Size = st.Size()
	return info, cutShort, true
}

// sniffWAV walks the RIFF chunks to the format and the data: the duration
// is the data's size at the format's byte rate. Only plain PCM is taken;
// compressed or extensible formats go to ffprobe.
func sniffWAV(f io.ReadSeeker, size int64) (Info, bool, bool) {
	if _, err := f.Seek(12, io.SeekStart); err != nil {
		return Info{}, false, false
	}
	var (
		byteRate uint32
		pcm      bool
		hdr      [8]byte
		format   Info
	)
	for pos := int64(12); pos+8 <= size; {
		if _, err := io.ReadFull(f, hdr[:]); err != nil {
			return Info{}, false, false
		}
		id, n := string(hdr[:4]), int64(binary.LittleEndian.Uint32(hdr[4:]))
		pos += 8
		switch id {
		case "fmt ":
			if n < 16 {
				return Info{}, false, false
			}
			var fmtChunk [16]byte
			if _, err := io.ReadFull(f, fmtChunk[:]); err != nil {
				return Info{}, false, false
			}
			pcm = binary.LittleEndian.Uint16(fmtChunk[0:]) == 1
			byteRate = binary.LittleEndian.Uint32(fmtChunk[8:])
			format.Channels = int(binary.LittleEndian.Uint16(fmtChunk[2:]))
			format.SampleRate = int(binary.LittleEndian.Uint32(fmtChunk[4:]))
			format.Bits = int(binary.LittleEndian.Uint16(fmtChunk[14:]))
			if _, err := f.Seek(n-16+n%2, io.SeekCurrent); err != nil {
				return Info{}, false, false
			}
		case "data":
			// A streaming writer leaves the size at its maximum; what is
			// really there is the rest of the file.
			cut := n > size-pos && n != 0xFFFFFFFF
			if n > size-pos || n == 0xFFFFFFFF {
				n = size - pos
			}
			if !pcm || byteRate == 0 || n <= 0 {
				return Info{}, false, false
			}
			format.Container, format.Codec = "wav", "pcm"
			format.Duration = time.Duration(float64(n) / float64(byteRate) * float64(time.Second))
			return format, cut, true
		default:
			if _, err := f.Seek(n+n%2, io.SeekCurrent); err != nil {
				return Info{}, false, false
			}
		}
		pos += n + n%2
	}
	return Info{}, false, false
}

// opusHead is the first packet of an Ogg/Opus stream (RFC 7845).
var opusHead = []byte("OpusHead")

// sniffOgg reads an Ogg stream whose first logical stream is Opus: its
// length is the last page's granule position at 48 kHz, less the
// encoder's pre-skip (RFC 7845). Other codecs, chained or multiplexed
// streams go to ffprobe.
func sniffOgg(f io.ReadSeeker, head []byte, size int64) (Info, bool, bool) {
	// The first page: 27 bytes of header, the segment table, then the
	// identification packet.
	if len(head) < 27 || head[5]&0x02 == 0 {
		return Info{}, false, false
	}
	segs := int(head[26])
	body := 27 + segs
	if len(head) < body+19 || !bytes.Equal(head[body:body+8], opusHead) {
		return Info{}, false, false
	}
	serial := binary.LittleEndian.Uint32(head[14:])
	channels := int(head[body+9])
	preSkip := int64(binary.LittleEndian.Uint16(head[body+10:]))
	// The last page is within the last 64 kB (a page is at most 65,307
	// bytes); search back for its capture pattern.
	tailLen := min(size, 65536+27)
	if _, err := f.Seek(size-tailLen, io.SeekStart); err != nil {
		return Info{}, false, false
	}
	tail := make([]byte, tailLen)
	if _, err := io.ReadFull(f, tail); err != nil {
		return Info{}, false, false
	}
	// A complete stream ends with a whole page flagged last; a page the
	// file stops inside of, or a last page without the flag, is a stream
	// cut off. The duration is then what the whole pages hold.
	cut := false
	for i := len(tail) - 27; i >= 0; i-- {
		if string(tail[i:i+4]) != "OggS" || tail[i+4] != 0 {
			continue
		}
		segs := int(tail[i+26])
		if i+27+segs > len(tail) {
			cut = true
			continue
		}
		pageLen := 27 + segs
		for _, l := range tail[i+27 : i+27+segs] {
			pageLen += int(l)
		}
		if i+pageLen > len(tail) {
			cut = true
			continue
		}
		if tail[i+5]&0x04 == 0 {
			cut = true
		}
		if binary.LittleEndian.Uint32(tail[i+14:]) != serial {
			// Another logical stream: a multiplexed file is ffprobe's.
			return Info{}, false, false
		}
		granule := int64(binary.LittleEndian.Uint64(tail[i+6:]))
		if granule == -1 {
			// No packet ends on this page; the one before says.
			continue
		}
		if granule <= preSkip {
			return Info{}, false, false
		}
		// Opus always decodes at 48 kHz; the header's input rate is only
		// what the encoder was given.
		return Info{Container: "ogg", Codec: "opus", Duration: time.Duration(granule-preSkip) * time.Second / 48000,
			SampleRate: 48000, Channels: channels}, cut, true
	}
	return Info{}, false, false
}
