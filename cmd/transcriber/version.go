package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

const versionUsage = `Usage: transcriber version

Prints the version of this binary, the commit and time it was built from
when the build recorded them, the Go release that built it, and the
versions of the Temporal server, SDK and Web UI server it embeds.`

// embeddedModules are the Temporal parts a bug report needs the versions
// of: what answers as the embedded server, what talks to it, what serves
// its Web UI.
var embeddedModules = []struct{ label, path string }{
	{"temporal server", "go.temporal.io/server"},
	{"temporal sdk", "go.temporal.io/sdk"},
	{"temporal api", "go.temporal.io/api"},
	{"temporal ui-server", "github.com/temporalio/ui-server/v2"},
}

func runVersion(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", versionUsage, stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return usageError("version takes no arguments")
	}
	info, _ := debug.ReadBuildInfo()
	writeVersion(stdout, info)
	return nil
}

// writeVersion prints what info holds; info is nil in a binary built
// without module support, which still prints the Go release.
func writeVersion(w io.Writer, info *debug.BuildInfo) {
	version, revision, at, modified := stamp(info)
	deps := map[string]string{}
	if info != nil {
		for _, d := range info.Deps {
			v := d.Version
			if d.Replace != nil {
				v = d.Replace.Version + " (replaces " + d.Version + ")"
			}
			deps[d.Path] = v
		}
	}
	fmt.Fprintf(w, "transcriber %s\n", version)
	if revision != "" {
		if modified {
			revision += " (with uncommitted changes)"
		}
		fmt.Fprintf(w, "  %-19s %s\n", "commit", revision)
	}
	if at != "" {
		fmt.Fprintf(w, "  %-19s %s\n", "commit time", at)
	}
	fmt.Fprintf(w, "  %-19s %s\n", "go", runtime.Version())
	for _, m := range embeddedModules {
		v, ok := deps[m.path]
		if !ok {
			v = "unknown"
		}
		fmt.Fprintf(w, "  %-19s %s\n", m.label, v)
	}
}

// buildID names this build to the workers' server, from its version and
// commit. Without one the SDK reads the whole executable, hundreds of
// megabytes with the embedded server, to checksum it before the first
// worker starts: most of a one-shot run's start-up.
func buildID(info *debug.BuildInfo) string {
	version, revision, _, modified := stamp(info)
	id := "transcriber@" + version
	if revision != "" {
		id += "+" + revision[:min(12, len(revision))]
	}
	if modified {
		id += "-modified"
	}
	return id
}

// stamp is what the build recorded of itself: its version ("devel" when it
// stamped none) and the commit, its time and whether the tree had changes.
func stamp(info *debug.BuildInfo) (version, revision, at string, modified bool) {
	version = "devel"
	if info == nil {
		return version, "", "", false
	}
	// "go build" in a checkout says "(devel)" unless it stamps a version
	// from the VCS tag.
	if v := info.Main.Version; v != "" && v != "(devel)" {
		version = v
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return version, revision, at, modified
}
