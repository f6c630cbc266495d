package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo describes this build of weir.
type versionInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func newVersionCommand(e *env) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of weir",
		Args:  exactArgs(),
		RunE: func(*cobra.Command, []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			v := buildVersion()
			if format == formatJSON {
				return writeJSON(e.stdout, v)
			}
			rev := ""
			if v.Revision != "" {
				rev = " " + v.Revision
				if v.Modified {
					rev += "+modified"
				}
			}
			_, err := fmt.Fprintf(e.stdout, "weir %s%s (%s, %s)\n", v.Version, rev, v.Go, v.Platform)
			return outputErr(err)
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}
