package vault

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// deviceFile holds this machine's device id in the data directory: outside
// the vault, so that syncing the vault never gives two machines one id.
const deviceFile = "device-id"

// Device returns the device id: named, when the operator named one;
// otherwise the one kept in dataDir, made on first use.
func Device(named, dataDir string) (string, error) {
	if named != "" {
		if err := CheckDevice(named); err != nil {
			return "", err
		}
		return named, nil
	}
	path := filepath.Join(dataDir, deviceFile)
	if b, err := os.ReadFile(path); err == nil {
		id := strings.TrimSpace(string(b))
		if err := CheckDevice(id); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return id, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	id := madeDevice()
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", err
	}
	// Two processes starting at once must agree: the first file wins.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return Device("", dataDir)
	}
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(id + "\n"); err != nil {
		_ = f.Close()
		return "", err
	}
	return id, f.Close()
}

// madeDevice names a new device after the machine, with a random tail so
// that two machines of one name differ.
func madeDevice() string {
	host, _ := os.Hostname() // a nameless host still gets the tail
	host = strings.Map(func(r rune) rune {
		if deviceRune(r) {
			return r
		}
		return '-'
	}, strings.ToLower(host))
	host = strings.Trim(host, "-.")
	if len(host) > 32 {
		host = host[:32]
	}
	tail := make([]byte, 3)
	_, _ = rand.Read(tail) // crypto/rand does not fail
	if host == "" {
		host = "device"
	}
	return host + "-" + hex.EncodeToString(tail)
}

func deviceRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
}

// CheckDevice accepts a device id that can name jobs and stand in a note:
// letters, digits, '-', '_' and '.', at most 64 of them.
func CheckDevice(id string) error {
	if id == "" || len(id) > 64 || strings.IndexFunc(id, func(r rune) bool { return !deviceRune(r) }) >= 0 {
		return fmt.Errorf("device id %q must be 1 to 64 letters, digits, '-', '_' or '.'", id)
	}
	return nil
}
