// Result lines and the driver's log - compat/README.md, "Driver contract":
// one JSON line per check on stdout, logs on stderr.
package driver

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// Reporter prints a driver's result lines and remembers which checks have one.
type Reporter struct {
	client, version string
	emitted         map[string]bool
}

// NewReporter reports for client at version.
func NewReporter(client, version string) *Reporter {
	return &Reporter{client: client, version: version, emitted: map[string]bool{}}
}

// Emit prints one result line: result is pass, fail or n/a.
func (r *Reporter) Emit(check, result, detail string) {
	line, _ := json.Marshal(map[string]string{
		"client": r.client, "version": r.version, "check": check, "result": result, "detail": detail,
	})
	fmt.Println(string(line))
	r.emitted[check] = true
}

// Verdict emits pass with okDetail, or fail with the problems (capped).
func (r *Reporter) Verdict(check string, problems []string, okDetail string) {
	if len(problems) > 0 {
		d := strings.Join(problems, "; ")
		if len(d) > 2000 {
			d = d[:2000]
		}
		r.Emit(check, "fail", d)
		return
	}
	r.Emit(check, "pass", okDetail)
}

// Logf logs one timestamped line on stderr.
func Logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

// Unique is prefix with a suffix no earlier run used: topic and group names.
func Unique(prefix string) string {
	return fmt.Sprintf("%s-%x", prefix, time.Now().UnixNano()&0xffffffffff)
}
