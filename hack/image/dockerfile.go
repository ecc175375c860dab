package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// instruction is one Dockerfile instruction, its continuation lines joined.
type instruction struct {
	file string // the Dockerfile's path, for messages
	line int    // where it starts, from 1
	cmd  string // upper case: FROM, RUN, …
	args string
}

// at is where the instruction is, for messages: Dockerfile:25.
func (in instruction) at() string { return fmt.Sprintf("%s:%d", in.file, in.line) }

func (in instruction) errorf(format string, a ...any) error {
	return fmt.Errorf("%s: %s: %s", in.at(), in.cmd, fmt.Sprintf(format, a...))
}

// stage is a FROM and the instructions after it.
type stage struct {
	from         instruction
	base, name   string
	instructions []instruction
}

// parse splits a Dockerfile into the ARGs before the first FROM and the
// stages. As Docker does, it drops comment lines (also inside a
// continuation), joins lines ending in a backslash and leaves the rest of
// the syntax to the instructions.
func parse(file string, dockerfile []byte) ([]instruction, []stage, error) {
	var (
		global  []instruction
		stages  []stage
		pending *instruction
		lineNo  int
		header  = true // parser directives (# syntax=…) stand at the top
	)
	sc := bufio.NewScanner(bytes.NewReader(dockerfile))
	for sc.Scan() {
		lineNo++
		line := strings.TrimRight(sc.Text(), " \t\r")
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			if header && directive.MatchString(trimmed) {
				if m := directive.FindStringSubmatch(trimmed); strings.EqualFold(m[1], "escape") && m[2] != `\` {
					return nil, nil, fmt.Errorf("%s:%d: only the escape character \\ is supported", file, lineNo)
				}
			}
			continue
		}
		header = false
		if trimmed == "" {
			continue
		}
		continued := strings.HasSuffix(line, `\`)
		line = strings.TrimSuffix(line, `\`)
		if pending == nil {
			cmd, args, _ := strings.Cut(strings.TrimLeft(line, " \t"), " ")
			pending = &instruction{file: file, line: lineNo, cmd: strings.ToUpper(strings.TrimSpace(cmd)), args: args}
		} else {
			pending.args += line
		}
		if continued {
			continue
		}
		in := *pending
		pending = nil
		in.args = strings.TrimSpace(in.args)
		switch {
		case in.cmd == "FROM":
			s, err := fromStage(in)
			if err != nil {
				return nil, nil, err
			}
			stages = append(stages, s)
		case len(stages) == 0 && in.cmd == "ARG":
			global = append(global, in)
		case len(stages) == 0:
			return nil, nil, in.errorf("only ARG may come before the first FROM")
		default:
			stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, in)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	if pending != nil {
		return nil, nil, pending.errorf("the last line ends in a line continuation")
	}
	if len(stages) == 0 {
		return nil, nil, fmt.Errorf("%s: no FROM", file)
	}
	return global, stages, nil
}

var directive = regexp.MustCompile(`^#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$`)

func fromStage(in instruction) (stage, error) {
	f := strings.Fields(in.args)
	switch {
	case len(f) == 1:
		return stage{from: in, base: f[0]}, nil
	case len(f) == 3 && strings.EqualFold(f[1], "AS"):
		return stage{from: in, base: f[0], name: strings.ToLower(f[2])}, nil
	default:
		return stage{}, in.errorf("want FROM IMAGE [AS NAME], got %q", in.args)
	}
}

// recipe is what a Dockerfile says to build: the go builds of the stages
// the final stage copies from, and the final stage's files and config.
type recipe struct {
	builds []goBuild
	copies []copied
	config v1.Config
	// history says, for the image's history, which instructions made the
	// layer.
	history string
}

// goBuild is one `go build` of a builder stage's RUN.
type goBuild struct {
	stage string
	at    string   // the RUN's file:line
	env   []string // the command's own assignments, e.g. CGO_ENABLED=0
	args  []string // after "go build", -o as written
	out   string   // the -o path in the builder stage
}

// copied is one file that COPY --from brings into the image.
type copied struct {
	stage     string
	at        string // the COPY's file:line
	src, dest string
}

// defaultPath is the PATH that BuildKit puts into the config of an image
// that sets none.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// interpret reads a Dockerfile whose final stage is FROM scratch and says
// what to build. buildArgs override ARG defaults, as docker build
// --build-arg does.
//
// The final stage may hold ARG, LABEL, COPY --from=STAGE, USER and
// ENTRYPOINT in exec form; anything else is an error, since this tool would
// build an image other than the Dockerfile's. From the stages it copies from
// it takes the `go build` commands of their RUN instructions: their WORKDIR,
// COPY and other RUN commands prepare a container the local build does not
// need (it builds in the source directory). ENV, a cd or shell syntax it
// cannot follow is an error there too.
func interpret(file string, dockerfile []byte, buildArgs map[string]string) (*recipe, error) {
	global, stages, err := parse(file, dockerfile)
	if err != nil {
		return nil, err
	}
	globalVars := map[string]string{}
	for _, in := range global {
		if err := declare(in, globalVars, globalVars, buildArgs); err != nil {
			return nil, err
		}
	}

	final := stages[len(stages)-1]
	if final.base != "scratch" {
		return nil, final.from.errorf("the final stage is FROM %s; only FROM scratch can be built without its base image", final.base)
	}
	r, err := finalStage(final, globalVars, buildArgs)
	if err != nil {
		return nil, err
	}

	// The stages the final stage copies from, each built once.
	var froms []string
	for _, c := range r.copies {
		if !slices.Contains(froms, c.stage) {
			froms = append(froms, c.stage)
		}
	}
	for _, from := range froms {
		i := slices.IndexFunc(stages[:len(stages)-1], func(s stage) bool { return s.name == from })
		if i < 0 {
			return nil, fmt.Errorf("%s: COPY --from=%s: no earlier stage is named %s", file, from, from)
		}
		builds, err := builderStage(stages[i], globalVars, buildArgs)
		if err != nil {
			return nil, err
		}
		r.builds = append(r.builds, builds...)
	}
	return r, checkCopies(r)
}

// declare sets the variables of an ARG instruction in vars: the build
// argument if given, else the default, else the global ARG's value.
func declare(in instruction, vars, global, buildArgs map[string]string) error {
	l := lexer{s: in.args}
	words, err := l.command(vars)
	if err != nil {
		return in.errorf("%v", err)
	}
	if len(words) == 0 {
		return in.errorf("no name")
	}
	for _, w := range words {
		name, value, hasDefault := strings.Cut(w.text, "=")
		if !isName(name) {
			return in.errorf("%q is not a variable name", name)
		}
		if g, ok := global[name]; ok && !hasDefault {
			value = g
		}
		if v, ok := buildArgs[name]; ok {
			value = v
		}
		vars[name] = value
	}
	return nil
}

// finalStage interprets the stage that becomes the image.
func finalStage(s stage, global, buildArgs map[string]string) (*recipe, error) {
	r := &recipe{config: v1.Config{Env: []string{defaultPath}}}
	vars := map[string]string{}
	var made []string
	for _, in := range s.instructions {
		switch in.cmd {
		case "ARG":
			if err := declare(in, vars, global, buildArgs); err != nil {
				return nil, err
			}
		case "LABEL":
			words, err := argWords(in, vars)
			if err != nil {
				return nil, err
			}
			if len(words) == 0 {
				return nil, in.errorf("no label")
			}
			for _, w := range words {
				k, v, ok := strings.Cut(w.text, "=")
				if !ok || k == "" {
					return nil, in.errorf("want KEY=VALUE, got %q", w.text)
				}
				if r.config.Labels == nil {
					r.config.Labels = map[string]string{}
				}
				r.config.Labels[k] = v
			}
		case "COPY":
			copies, err := copyInstruction(in, vars)
			if err != nil {
				return nil, err
			}
			r.copies = append(r.copies, copies...)
			made = append(made, in.cmd+" "+in.args)
		case "USER":
			words, err := argWords(in, vars)
			if err != nil {
				return nil, err
			}
			if len(words) != 1 {
				return nil, in.errorf("want one USER[:GROUP], got %q", in.args)
			}
			r.config.User = words[0].text
		case "ENTRYPOINT":
			var argv []string
			if err := json.Unmarshal([]byte(in.args), &argv); err != nil || len(argv) == 0 {
				return nil, in.errorf(`want the exec form ["/path", "arg", …]: a scratch image has no shell for the shell form`)
			}
			r.config.Entrypoint = argv
		default:
			return nil, in.errorf("not supported in the final stage (ARG, LABEL, COPY --from, USER and ENTRYPOINT are)")
		}
	}
	r.history = strings.Join(made, "; ")
	return r, nil
}

func argWords(in instruction, vars map[string]string) ([]word, error) {
	l := lexer{s: in.args}
	words, err := l.command(vars)
	if err != nil {
		return nil, in.errorf("%v", err)
	}
	return words, nil
}

// copyInstruction reads COPY --from=STAGE SRC… DEST. DEST ending in / (or
// with several sources) is a directory that receives each source by its
// base name.
func copyInstruction(in instruction, vars map[string]string) ([]copied, error) {
	if strings.HasPrefix(in.args, "[") {
		return nil, in.errorf("the JSON form is not supported")
	}
	words, err := argWords(in, vars)
	if err != nil {
		return nil, err
	}
	var from string
	for len(words) > 0 && strings.HasPrefix(words[0].text, "--") {
		flag, value, _ := strings.Cut(words[0].text, "=")
		if flag != "--from" || value == "" {
			return nil, in.errorf("%s is not supported (only --from=STAGE)", words[0].text)
		}
		from = strings.ToLower(value)
		words = words[1:]
	}
	if from == "" {
		return nil, in.errorf("only COPY --from=STAGE is supported: the image is made of what the builder stages build")
	}
	if len(words) < 2 {
		return nil, in.errorf("want SRC… DEST")
	}
	dest := words[len(words)-1].text
	srcs := words[:len(words)-1]
	if !path.IsAbs(dest) {
		return nil, in.errorf("DEST %q is not absolute (a scratch image has no WORKDIR)", dest)
	}
	dir := strings.HasSuffix(dest, "/")
	if len(srcs) > 1 && !dir {
		return nil, in.errorf("with several sources DEST must end in /")
	}
	var out []copied
	for _, src := range srcs {
		c := copied{stage: from, at: in.at(), src: path.Clean(src.text), dest: path.Clean(dest)}
		if dir {
			c.dest = path.Join(dest, path.Base(c.src))
		}
		out = append(out, c)
	}
	return out, nil
}

// builderStage finds the go builds in a stage's RUN instructions.
func builderStage(s stage, global, buildArgs map[string]string) ([]goBuild, error) {
	vars := map[string]string{}
	var builds []goBuild
	for _, in := range s.instructions {
		switch in.cmd {
		case "ARG":
			if err := declare(in, vars, global, buildArgs); err != nil {
				return nil, err
			}
		case "WORKDIR", "COPY":
			// They prepare the builder's source tree; the local build
			// has it already.
		case "RUN":
			if !goBuildCmd.MatchString(in.args) {
				continue // e.g. go mod download
			}
			b, err := runInstruction(in, s.name, vars)
			if err != nil {
				return nil, err
			}
			builds = append(builds, b...)
		default:
			return nil, in.errorf("not supported in stage %s, which the final stage copies from (FROM, ARG, WORKDIR, COPY and RUN are)", s.name)
		}
	}
	if len(builds) == 0 {
		return nil, s.from.errorf("stage %s runs no go build", s.name)
	}
	return builds, nil
}

var goBuildCmd = regexp.MustCompile(`\bgo\s+build\b`)

// runInstruction reads the go build commands of one RUN in shell form,
// following its variable assignments.
func runInstruction(in instruction, stageName string, args map[string]string) ([]goBuild, error) {
	if strings.HasPrefix(in.args, "[") {
		return nil, in.errorf("the exec form of a RUN with go build is not supported")
	}
	vars := maps.Clone(args)
	l := lexer{s: in.args, shell: true}
	var builds []goBuild
	for !l.done() {
		words, err := l.command(vars)
		if err != nil {
			return nil, in.errorf("%v", err)
		}
		var env []string
		for len(words) > 0 && words[0].assign {
			env = append(env, words[0].text)
			words = words[1:]
		}
		switch {
		case len(words) == 0:
			// NAME=VALUE alone sets a shell variable for the rest of the RUN.
			for _, e := range env {
				k, v, _ := strings.Cut(e, "=")
				vars[k] = v
			}
		case words[0].text == "cd":
			return nil, in.errorf("cd is not supported: the build runs in the source directory")
		case len(words) >= 2 && words[0].text == "go" && words[1].text == "build":
			b := goBuild{stage: stageName, at: in.at(), env: env}
			for _, w := range words[2:] {
				b.args = append(b.args, w.text)
			}
			out, err := outputFlag(b.args)
			if err != nil {
				return nil, in.errorf("go build: %v", err)
			}
			b.out = out
			builds = append(builds, b)
		}
	}
	return builds, nil
}

// outputFlag returns go build's -o, which must name a file by its absolute
// path.
func outputFlag(args []string) (string, error) {
	var out []string
	for i, a := range args {
		switch {
		case a == "-o" || a == "--o":
			if i+1 < len(args) {
				out = append(out, args[i+1])
			}
		case strings.HasPrefix(a, "-o=") || strings.HasPrefix(a, "--o="):
			_, v, _ := strings.Cut(a, "=")
			out = append(out, v)
		}
	}
	if len(out) != 1 || !path.IsAbs(out[0]) || strings.HasSuffix(out[0], "/") {
		return "", fmt.Errorf("want one -o /DIR/NAME, got %q", out)
	}
	return path.Clean(out[0]), nil
}

// checkCopies insists that the final stage copies exactly the files built:
// every COPY source is a go build output, and every output is copied.
func checkCopies(r *recipe) error {
	built := map[string]bool{}
	for _, b := range r.builds {
		if built[b.stage+":"+b.out] {
			return fmt.Errorf("%s: go build -o %s: built twice", b.at, b.out)
		}
		built[b.stage+":"+b.out] = true
	}
	copiedFrom := map[string]bool{}
	dests := map[string]bool{}
	for _, c := range r.copies {
		key := c.stage + ":" + c.src
		if !built[key] {
			return fmt.Errorf("%s: COPY --from=%s %s: no go build in stage %s writes it", c.at, c.stage, c.src, c.stage)
		}
		if dests[c.dest] {
			return fmt.Errorf("%s: COPY: %s is copied twice", c.at, c.dest)
		}
		copiedFrom[key], dests[c.dest] = true, true
	}
	for _, b := range r.builds {
		if !copiedFrom[b.stage+":"+b.out] {
			return fmt.Errorf("%s: go build -o %s: the final stage does not copy it", b.at, b.out)
		}
	}
	return nil
}
