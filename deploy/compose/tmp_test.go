package compose

import (
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
)

func TestX(t *testing.T) { _ = loader.LoadWithContext }
