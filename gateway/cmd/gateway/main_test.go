package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestHelpListsGatewaySettings(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, &out, &errb); code != 0 {
		t.Fatalf("--help exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"-gateway.client-listen", "default :9000", "-gateway.max-connections", "HEALTH_CHECK_PORT"} {
		if !strings.Contains(errb.String(), want) {
			t.Fatalf("--help lacks %q:\n%s", want, errb.String())
		}
	}
}

func TestUnknownFlagFails(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--no-such-flag"}, &out, &errb); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
}
