// Command baton runs, inspects and simulates baton stream-processing
// groups. See the README for the commands.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr reports bad input: exit 2 with one line on stderr.
func usageErr(err error) error { return &exitError{code: 2, err: err} }

var rootCmd = &cobra.Command{
	Use:           "baton",
	Short:         "Stateful stream processing on Kafka that scales without stopping the world",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	rootCmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	err := rootCmd.Execute()
	if err == nil {
		return
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "baton") {
		msg = "baton: " + msg
	}
	fmt.Fprintln(os.Stderr, msg)
	var ee *exitError
	if errors.As(err, &ee) {
		os.Exit(ee.code)
	}
	os.Exit(1)
}
