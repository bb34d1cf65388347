package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/proctest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { proctest.RemoveBuilds() }))
}
