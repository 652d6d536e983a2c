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
// usage are printed by Run (once), flag and argument errors are usage
// errors, and --version prints "NAME VERSION". Call it once the command tree
// is complete.
func Prepare(root *cobra.Command, version string) *cobra.Command {
	root.SilenceUsage = true
	root.SilenceErrors = true
	root.Version = version
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return UsageError(fmt.Errorf("%w (see `%s --help`)", err, c.CommandPath()))
	})
	argsAreUsage(root)
	return root
}

// argsAreUsage makes every command's argument check (cobra.ExactArgs, …)
// fail with a usage error.
func argsAreUsage(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error { return UsageError(check(cmd, args)) }
	}
	for _, sub := range c.Commands() {
		argsAreUsage(sub)
	}
}

// Run executes root with args and returns the exit code, printing the error
// (if any) as "NAME: message" to stderr.
func Run(root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return OK
	}
	// An error that only carries an exit code (the command already said
	// what happened) prints nothing.
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stderr, "%s: %s\n", root.Name(), msg)
	}
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	if IsUsage(err) {
		return Usage
	}
	return Failed
}

// IsUsage reports whether err is a usage error: marked by UsageError (flag
// and argument errors are, through Prepare), or cobra's unknown command.
func IsUsage(err error) bool {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code == Usage
	}
	return strings.HasPrefix(err.Error(), "unknown command ")
}
