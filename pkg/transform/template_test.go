package transform

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestTemplateFunctions(t *testing.T) {
	tests := []struct {
		tmpl    string
		want    string
		wantErr string
	}{
		{tmpl: `{{ upper .TargetNamespace }}`, want: "PROD-EU"},
		{tmpl: `{{ "ÀB" | lower }}`, want: "àb"},
		{tmpl: `{{ .TargetNamespace | replace "-" "_" | upper }}`, want: "PROD_EU"},
		{tmpl: `{{ replace "" "." "ab" }}`, want: ".a.b."},
		{tmpl: `{{ trimPrefix "prod-" .TargetNamespace }}`, want: "eu"},
		{tmpl: `{{ trimSuffix "-eu" .TargetNamespace }}`, want: "prod"},
		{tmpl: `{{ hasPrefix "prod-" .TargetNamespace }} {{ hasSuffix "-us" .TargetNamespace }}`, want: "true false"},
		{tmpl: `{{ default "none" .Labels.missing }} {{ default "none" .Labels.team }} {{ .Labels.nope | default "x" }}`, want: "none payments x"},
		{tmpl: `{{ default "d" "" }}{{ default "d" 0 }}{{ default "d" false }}{{ default "d" }}`, want: "dddd"},
		{tmpl: `{{ quote "a\"b" }}`, want: `"a\"b"`},
		{tmpl: `{{ b64enc "hello" }} {{ b64dec "aGVsbG8=" }}`, want: "aGVsbG8= hello"},
		{tmpl: `{{ b64dec "!!" }}`, wantErr: "illegal base64"},
		{tmpl: `{{ printf "%s/%s:%d %5.1f %q %x %%" .SourceNamespace .SourceName 8080 3.14159 "q" "hi" }}`, want: `platform/app-config:8080   3.1 "q" 6869 %`},
		{tmpl: `{{ printf "%v" .Labels }}`, want: "map[team:payments]"},
		{tmpl: `{{ printf "%s" }}`, wantErr: "no argument for %s"},
		{tmpl: `{{ printf "%s" "a" "b" }}`, wantErr: "2 arguments but the format uses 1"},
		{tmpl: `{{ printf "%*d" 5 1 }}`, wantErr: "not supported"},
		{tmpl: `{{ printf "%[1]d" 1 }}`, wantErr: "not supported"},
		{tmpl: `{{ printf "abc%" }}`, wantErr: "incomplete verb"},
		{tmpl: `{{ print "a" "b" 1 2 "c" }}|{{ println "a" 1 }}`, want: fmt.Sprint("a", "b", 1, 2, "c") + "|" + fmt.Sprintln("a", 1)},
		{tmpl: `{{ html "<a href='x'>" }} {{ js "it's" }} {{ urlquery "a b&c" }} {{ urlquery "a" 1 }}`, want: "&lt;a href=&#39;x&#39;&gt; it\\'s a+b%26c a1"},
		{tmpl: `{{ if eq .TargetCluster "eu-1" }}eu{{ else if eq .TargetCluster "us-1" }}us{{ else }}?{{ end }}`, want: "eu"},
		{tmpl: `{{ with .Labels.team }}{{ . }}{{ else }}none{{ end }}`, want: "payments"},
		{tmpl: `{{ $n := len .TargetNamespace }}{{ $n }} {{ slice .TargetNamespace 0 4 }} {{ index .Labels "team" }}`, want: "7 prod payments"},
		{tmpl: `{{/* a comment */}}{{ and .TargetName .SourceName }} {{ not true }}`, want: "app-config false"},
		{tmpl: `{{ .Nope }}`, wantErr: "can't evaluate field Nope"},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl, func(t *testing.T) {
			tmpl, err := parseTemplate(tt.tmpl)
			if err != nil {
				t.Fatalf("parseTemplate: %v", err)
			}
			got, err := execute(tmpl, target, DefaultLimits())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("execute = %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("execute: %v", err)
			}
			if got != tt.want {
				t.Errorf("execute = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTemplateLimits runs adversarial templates: each must fail (or, for
// the slow ones, finish) quickly, without allocating much more than the
// output limit, whatever it asks for.
func TestTemplateLimits(t *testing.T) {
	nest := func(n int, open, inner, close string) string {
		return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
	}
	tenX := `"xxxxxxxxxx"`
	// lessThans sets $a to 100 KB of '<', which every escaper grows.
	lessThans := `{{ $a := replace "x" "<<<<<<<<<<" (` + nest(3, `replace "x" `+tenX+` (`, tenX, `)`) + `) }}`
	tests := []struct {
		name    string
		tmpl    string
		wantErr string // "" means it may succeed
	}{
		{name: "nested replace grows 10^12 times",
			tmpl:    `{{ ` + nest(12, `replace "x" `+tenX+` (`, tenX, `)`) + ` }}`,
			wantErr: "over the remaining budget"},
		{name: "empty old in replace",
			tmpl:    `{{ ` + nest(8, `replace "" `+tenX+` (`, tenX, `)`) + ` }}`,
			wantErr: "over the remaining budget"},
		{name: "huge output from many small writes",
			tmpl:    `{{ $a := ` + nest(4, `replace "x" `+tenX+` (`, tenX, `)`) + ` }}` + strings.Repeat(`{{ $a }}`, 20),
			wantErr: "template output is over the limit of 1048576 bytes"},
		{name: "variables cannot keep many large results",
			tmpl:    strings.Repeat(`{{ $a := `+nest(5, `replace "x" `+tenX+` (`, tenX, `)`)+` }}`, 20),
			wantErr: "over the remaining budget"},
		{name: "b64enc doubling",
			tmpl:    `{{ ` + nest(60, `b64enc (`, tenX, `)`) + ` }}`,
			wantErr: "over the remaining budget"},
		{name: "upper of a large string, repeatedly",
			tmpl:    `{{ $a := ` + nest(5, `replace "x" `+tenX+` (`, tenX, `)`) + ` }}` + strings.Repeat(`{{ $b := upper $a }}`, 20),
			wantErr: "over the remaining budget"},
		{name: "quote growth",
			tmpl:    `{{ ` + nest(20, `quote (`, `"\x00"`, `)`) + ` }}`,
			wantErr: "over the remaining budget"},
		{name: "printf widths",
			tmpl:    `{{ printf "` + strings.Repeat("%999999d", 200) + `" ` + strings.Repeat("1 ", 200) + `}}`,
			wantErr: "over the remaining budget"},
		{name: "printf precision",
			tmpl:    `{{ printf "%.999999f%.999999f" 1.0 1.0 }}`,
			wantErr: "over the remaining budget"},
		{name: "print of a large value many times",
			tmpl:    `{{ $a := ` + nest(4, `replace "x" `+tenX+` (`, tenX, `)`) + ` }}{{ print ` + strings.Repeat("$a ", 500) + `}}`,
			wantErr: "over the remaining budget"},
		{name: "nested html",
			tmpl:    lessThans + `{{ html (html (html $a)) }}`,
			wantErr: "over the remaining budget"},
		{name: "nested js",
			tmpl:    lessThans + `{{ js (js $a) }}`,
			wantErr: "over the remaining budget"},
		{name: "nested urlquery",
			tmpl:    lessThans + `{{ urlquery (urlquery (urlquery $a)) }}`,
			wantErr: "over the remaining budget"},
		{name: "deep nesting of calls",
			tmpl: `{{ ` + nest(1100, `lower (`, `"X"`, `)`) + ` }}`},
		{name: "deep nesting of ifs",
			tmpl: nest(400, `{{ if true }}`, `x`, `{{ end }}`)},
		{name: "many comparisons of large strings",
			tmpl: `{{ $a := ` + nest(4, `replace "x" `+tenX+` (`, tenX, `)`) + ` }}{{ $b := upper $a }}` + strings.Repeat(`{{ eq $a $b }}`, 400)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := "rules:\n- path: data.x\n  template: '" + tt.tmpl + "'"
			l := DefaultLimits()
			if tt.wantErr != "" {
				// These must be stopped by the output budget. On a loaded
				// machine (the race detector, envtest suites beside) the
				// 100ms clock could end them first and hide a broken budget.
				l.Timeout = 10 * time.Second
			}
			r, err := Parse(text, l, reservedKeys)
			if err != nil {
				t.Fatalf("Parse (%d bytes): %v", len(text), err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			errs := r.Apply(map[string]any{}, target, false)
			took := time.Since(start)
			runtime.ReadMemStats(&after)

			if tt.wantErr != "" {
				if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.wantErr) {
					t.Fatalf("Apply = %v, want one error containing %q", errs, tt.wantErr)
				}
			} else if len(errs) > 1 || len(errs) == 1 && !strings.Contains(errs[0].Error(), "did not finish") {
				t.Fatalf("Apply = %v", errs)
			}
			if took > l.Timeout+time.Second {
				t.Errorf("Apply took %s", took)
			}
			// The budget and the writer each allow MaxOutput; builders may
			// double their capacity once and fmt copies once more.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16*uint64(l.MaxOutput) {
				t.Errorf("Apply allocated %d MiB", alloc>>20)
			}
		})
	}
}

// TestTemplateTimeout checks that an execution past Timeout is abandoned
// with an error, and that the abandoned goroutine stops soon after: that
// is what makes abandoning safe.
func TestTemplateTimeout(t *testing.T) {
	l := Limits{Timeout: time.Microsecond}
	tenX := `"xxxxxxxxxx"`
	// 10 KB, then 80 passes over it: about a millisecond of work, well
	// within the budget.
	big := strings.Repeat(`replace "x" `+tenX+` (`, 3) + tenX + strings.Repeat(`)`, 3)
	text := "rules:\n- path: data.x\n  template: '{{ $a := " + big + " }}" + strings.Repeat(`{{ $a = lower $a }}{{ $a = upper $a }}`, 40) + "'"
	// With time enough the template succeeds within every other limit:
	// only time stops it. (Not the default 100ms: under -race on a loaded
	// machine this millisecond of work can take longer.)
	roomy := DefaultLimits()
	roomy.Timeout = 30 * time.Second
	r, err := Parse(text, roomy, reservedKeys)
	if err != nil {
		t.Fatal(err)
	}
	checkErrs(t, r.Apply(map[string]any{}, target, false), nil)

	r, err = Parse(text, l, reservedKeys)
	if err != nil {
		t.Fatal(err)
	}
	baseline := runtime.NumGoroutine()
	timedOut := 0
	for range 20 {
		errs := r.Apply(map[string]any{}, target, false)
		if len(errs) == 1 && strings.Contains(errs[0].Error(), "did not finish within 1µs") {
			timedOut++
		}
	}
	if timedOut == 0 {
		t.Fatalf("no execution timed out")
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > baseline && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseline {
		t.Errorf("%d goroutines still running after the timeouts, %d before", n, baseline)
	}
}

// TestApplyConcurrent runs one Rules from several goroutines, for -race.
func TestApplyConcurrent(t *testing.T) {
	r, err := Parse(issueExample, DefaultLimits(), reservedKeys)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 50 {
				obj := map[string]any{"data": map[string]any{"DEBUG": "1"}, "metadata": map[string]any{}}
				r.Apply(obj, target, false)
			}
		}()
	}
	for range 8 {
		<-done
	}
}
