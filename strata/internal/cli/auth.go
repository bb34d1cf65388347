package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/strataio/strata/libs/authtoken"
)

const authUsage = `usage:
  strata auth hash-token [--token T] [--iterations N]

hash-token prints the salted PBKDF2-SHA256 hash of a client token, the form
gateway.sasl_principals entries hold (name:permission[+permission...]:hash).
The token is read from the first line of stdin unless --token is given
(stdin keeps it out of shell history and the process list).
`

func runAuth(_ context.Context, args []string, stdout, stderr io.Writer) int {
	return runAuthWith(args, os.Stdin, stdout, stderr)
}

func runAuthWith(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	sub, code, ok := subcommand(args, authUsage, stdout, stderr)
	if !ok {
		return code
	}
	if sub != "hash-token" {
		return unknownSubcommand(stderr, "auth", sub, authUsage)
	}
	fs := newFlagSet("strata auth hash-token", authUsage, stderr)
	token := fs.String("token", "", "the token (default: the first line of stdin)")
	iterations := fs.Int("iterations", authtoken.DefaultIterations,
		fmt.Sprintf("PBKDF2 work factor (%d to %d)", authtoken.MinIterations, authtoken.MaxIterations))
	if _, err := parseCount(fs, args[1:], 0); err != nil {
		return parseExit(err)
	}
	t := *token
	if t == "" {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && line == "" {
			return usageError(stderr, fs, "no token: give --token or a line on stdin")
		}
		t = strings.TrimRight(line, "\r\n")
	}
	if t == "" {
		return usageError(stderr, fs, "the token is empty")
	}
	h, err := authtoken.New(t, *iterations)
	if err != nil {
		return usageError(stderr, fs, "%v", err)
	}
	fmt.Fprintln(stdout, h.String())
	return exitOK
}
