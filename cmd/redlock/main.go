// Command redlock works with Redlock locks over independent Redis masters.
//
//	redlock demo [-addrs host:port,...] [-miniredis] [-workers n] [-rounds n]
//
// demo shows the lock at work on five local nodes it starts itself, with no
// setup: workers contend for one key under fencing while one node is stalled
// and another killed.
package main

import (
	"fmt"
	"log"
	"os"
)

// commands are the subcommands, in the order usage lists them.
var commands = []struct {
	name, summary string
	run           func(args []string) error
}{
	{"demo", "contend for one key on five local nodes while one stalls and one dies", demo},
}

func main() {
	log.SetFlags(0)
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	for _, c := range commands {
		if c.name == name {
			if err := c.run(os.Args[2:]); err != nil {
				log.Fatal(err)
			}
			return
		}
	}
	if name == "help" || name == "-h" || name == "-help" || name == "--help" {
		usage()
		return
	}
	fmt.Fprintf(os.Stderr, "redlock: unknown command %q\n", name)
	usage()
	os.Exit(2)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: redlock <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(os.Stderr, "\n'redlock <command> -h' lists a command's flags.")
}
