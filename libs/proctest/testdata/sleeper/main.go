// Command sleeper is the binary proctest's Build test compiles: it prints
// its arguments and exits.
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	fmt.Println("args", strings.Join(os.Args[1:], " "))
}
