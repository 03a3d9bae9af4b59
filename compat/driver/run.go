// The driver skeleton every Go driver runs (compat/README.md, "Driver
// contract"): the common flags, one check per invocation, the exit status,
// and a fail line for every result a check that errored out had not
// emitted. The Go twin of compat_common.driver_main. Owns no Kafka client:
// each driver hands over its checks.
package driver

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

// Args are the flags every driver takes.
type Args struct {
	Bootstrap, Check, Assignor, Phase, State string
	Messages                                 int
	Stage                                    time.Duration // how long one wait may take
}

// Check runs one check against a.Bootstrap and reports through rep; an error
// means it could not run to its verdict.
type Check func(rep *Reporter, a Args) error

// Main parses the flags (a driver registers its own on flag.CommandLine
// before), runs -check and exits: 2 on a usage error, 1 when the check
// returned an error (after a fail line for each of its results not yet
// emitted), else normally. module is the client library's Go module path,
// whose version every result line reports.
func Main(client, module string, checks map[string]Check) {
	var a Args
	names := make([]string, 0, len(checks))
	for name := range checks {
		names = append(names, name)
	}
	sort.Strings(names)
	flag.StringVar(&a.Bootstrap, "bootstrap", "", "host:port of the broker")
	flag.StringVar(&a.Check, "check", "", strings.Join(names, " | "))
	flag.StringVar(&a.Assignor, "assignor", "default", "default | range | roundrobin | cooperative-sticky")
	flag.StringVar(&a.Phase, "phase", "", "commit-resume phase: a | b")
	flag.StringVar(&a.State, "state", "", "commit-resume state file")
	flag.IntVar(&a.Messages, "messages", 1000, "messages per check")
	stage := flag.Float64("stage-timeout", 60, "seconds one wait may take")
	flag.Parse()
	a.Stage = time.Duration(*stage * float64(time.Second))

	rep := NewReporter(client, moduleVersion(module))
	run, ok := checks[a.Check]
	if !ok || a.Bootstrap == "" {
		fmt.Fprintf(os.Stderr, "usage: %s-driver -bootstrap HOST:PORT -check CHECK [...]\n", client)
		os.Exit(2)
	}
	if err := run(rep, a); err != nil {
		Logf("driver error: %v", err)
		for _, c := range results(a) {
			if !rep.emitted[c] {
				rep.Emit(c, "fail", fmt.Sprintf("driver error: %v", err))
			}
		}
		os.Exit(1)
	}
}

// results names the result lines a's check emits.
func results(a Args) []string {
	switch a.Check {
	case "group":
		return []string{GroupCheckName(a)}
	case "produce-fetch":
		return []string{"produce", "fetch"}
	}
	return []string{a.Check}
}

// GroupCheckName is the group check's result name: "group", or
// "group:ASSIGNOR" for an assignor other than the client's default.
func GroupCheckName(a Args) string {
	if a.Assignor == "default" {
		return "group"
	}
	return "group:" + a.Assignor
}

// moduleVersion is the version of module this binary was built with.
func moduleVersion(module string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == module {
				return d.Version
			}
		}
	}
	return "unknown"
}
