// Package entry runs a termd binary's cobra command the same way for every
// binary: one help layout (--help), --version, errors printed once as
// "NAME: message" on stderr, and exit codes 0 (ok), 1 (failed), 2 (usage:
// a bad flag or argument, or a setting refused before starting).
package entry

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	OK     = 0
	Failed = 1
	Usage  = 2
)

// exitError carries an exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// ExitCode is the process exit code for this error.
func (e *exitError) ExitCode() int { return e.code }

// UsageError marks err as a usage error (exit code 2): a flag, argument or
// setting refused before anything started.
func UsageError(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: Usage, err: err}
}

// Prepare sets what every termd binary's root command shares: errors and
// usage are printed by Run (once), flag errors are usage errors, and
// --version prints "NAME VERSION".
func Prepare(root *cobra.Command, version string) *cobra.Command {
	root.SilenceUsage = true
	root.SilenceErrors = true
	root.Version = version
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return UsageError(fmt.Errorf("%w (see `%s --help`)", err, c.CommandPath()))
	})
	return root
}

// Run executes root with args and returns the exit code, printing the error
// (if any) as "NAME: message" to stderr.
func Run(root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return OK
	}
	fmt.Fprintf(stderr, "%s: %v\n", root.Name(), err)
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	if IsUsage(err) {
		return Usage
	}
	return Failed
}

// IsUsage reports whether err is cobra's or pflag's complaint about the
// command line (unknown command or flag, wrong number of arguments).
func IsUsage(err error) bool {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code == Usage
	}
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires at least", "requires exactly", "invalid argument", "flag needs an argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
