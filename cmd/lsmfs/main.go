// Command lsmfs makes, mounts and checks lsmfs filesystems. See Main.
package main

import (
	"fmt"
	"os"
)

func main() {
	err := Main(os.Args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lsmfs: "+oneLine(err))
	}
	os.Exit(exitCode(err))
}
