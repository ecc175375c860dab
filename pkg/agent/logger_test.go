package agent

import (
	"bytes"
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// zapOptions parses args as the binaries parse the zap flags.
func zapOptions(t *testing.T, args ...string) zap.Options {
	t.Helper()
	var o zap.Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestLoggerKeepsEveryLine: the agents' logger writes every line, where
// controller-runtime's production logger keeps the first 100 lines of a
// message in a second and then every 100th.
func TestLoggerKeepsEveryLine(t *testing.T) {
	const lines = 250
	count := func(newLog func(zap.Options) logr.Logger) int {
		var out bytes.Buffer
		o := zapOptions(t)
		o.DestWriter = &out
		log := newLog(o)
		for i := range lines {
			log.Info("Mirror written", "i", i)
		}
		return strings.Count(out.String(), "\n")
	}
	if got := count(newLogger); got != lines {
		t.Errorf("newLogger wrote %d of %d lines", got, lines)
	}
	// What the test guards against: controller-runtime samples.
	sampled := count(crLogger)
	if sampled >= lines {
		t.Fatalf("controller-runtime's logger wrote all %d lines: the premise of newLogger is gone", lines)
	}
}

// TestLoggerLinesAsControllerRuntime: below the sampler's threshold,
// newLogger writes the very lines controller-runtime's zap.New writes, for
// every combination of the zap flags the charts set.
func TestLoggerLinesAsControllerRuntime(t *testing.T) {
	times := regexp.MustCompile(`"ts":("[^"]*"|[0-9.e+]+)|^\S+\t`)
	for _, args := range [][]string{
		nil,
		{"--zap-log-level=error"},
		{"--zap-log-level=debug"},
		{"--zap-log-level=3"},
		{"--zap-encoder=console"},
		{"--zap-time-encoding=epoch"},
		{"--zap-time-encoding=iso8601"},
		{"--zap-stacktrace-level=info"},
		{"--zap-stacktrace-level=panic", "--zap-encoder=console", "--zap-log-level=info"},
		{"--zap-devel"},
		{"--zap-devel", "--zap-encoder=json"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			write := func(newLog func(zap.Options) logr.Logger) []string {
				var out bytes.Buffer
				o := zapOptions(t, args...)
				o.DestWriter = &out
				logSome(newLog(o))
				var lines []string
				for l := range strings.Lines(out.String()) {
					lines = append(lines, times.ReplaceAllString(l, "TIME"))
				}
				return lines
			}
			// One call site for both, so that their stack traces match.
			var written [2][]string
			for i, newLog := range []func(zap.Options) logr.Logger{newLogger, crLogger} {
				written[i] = write(newLog)
			}
			got, want := written[0], written[1]
			if len(got) == 0 {
				t.Fatal("no line written")
			}
			if strings.Join(got, "") != strings.Join(want, "") {
				t.Errorf("newLogger wrote\n%s\ncontroller-runtime's logger\n%s", strings.Join(got, ""), strings.Join(want, ""))
			}
		})
	}
}

// crLogger is the logger of controller-runtime's zap.New with options o.
func crLogger(o zap.Options) logr.Logger { return zap.New(zap.UseFlagOptions(&o)) }

// logSome logs what the agents log: levels, names, values, errors and
// Kubernetes objects. One function, so that stack traces match.
func logSome(log logr.Logger) {
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db"}}
	obj.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("Secret"))
	log.Info("Starting", "writer", "member", "workers", 4)
	log.V(1).Info("Reconciled", "source", obj)
	log.V(2).Info("Watch opened", "kind", "Secret")
	log.WithName("fleet").WithValues("cluster", "east").Info("Cluster ready")
	log.Error(errors.New("forbidden"), "Mirror not written", "namespace", "team-b")
	log.WithName("memlimit").V(3).Info("no limit")
}
