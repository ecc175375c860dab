// Command chart-docs writes the table of values into each chart's README.md,
// from the comments of its values.yaml: a key whose comment has a line
// starting with "# --" is one value (the comment from that line on is its
// description); a mapping key without one is a section and its keys are
// listed instead. A value without a description is an error, so every value
// is documented.
//
//	go run ./hack/chart-docs [-check] charts/member charts/hub
//
// The table replaces what is between the README's markers
// "<!-- values:begin -->" and "<!-- values:end -->". With -check nothing is
// written; it fails when a README is not up to date.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

const (
	beginMarker = "<!-- values:begin -->"
	endMarker   = "<!-- values:end -->"
)

func main() {
	check := flag.Bool("check", false, "fail if a README is not up to date instead of writing it")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: chart-docs [-check] CHART_DIR...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	failed := false
	for _, dir := range flag.Args() {
		if err := run(dir, *check); err != nil {
			fmt.Fprintf(os.Stderr, "chart-docs: %v\n", err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func run(dir string, check bool) error {
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return err
	}
	rows, err := Rows(values)
	if err != nil {
		return fmt.Errorf("%s/values.yaml: %w", dir, err)
	}
	readmePath := filepath.Join(dir, "README.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	updated, err := replaceTable(readme, Table(rows))
	if err != nil {
		return fmt.Errorf("%s: %w", readmePath, err)
	}
	if bytes.Equal(updated, readme) {
		return nil
	}
	if check {
		return fmt.Errorf("%s is not up to date with values.yaml; run hack/chart-docs.sh", readmePath)
	}
	return os.WriteFile(readmePath, updated, 0o644)
}

// Row documents one value.
type Row struct {
	Key, Type, Default, Description string
}

// Rows lists the values of a values.yaml in file order.
func Rows(values []byte) ([]Row, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(values, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("not a mapping")
	}
	var rows []Row
	err := walk(doc.Content[0], "", &rows)
	return rows, err
}

func walk(m *yaml.Node, prefix string, rows *[]Row) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, val := m.Content[i], m.Content[i+1]
		path := prefix + key.Value
		desc, ok := description(key.HeadComment)
		switch {
		case ok:
			def, err := defaultOf(val)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			*rows = append(*rows, Row{Key: path, Type: typeOf(val), Default: def, Description: desc})
		case val.Kind == yaml.MappingNode && len(val.Content) > 0:
			if err := walk(val, path+".", rows); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s has no description (a comment line starting with \"# --\" above it)", path)
		}
	}
	return nil
}

// description returns the text of a comment from its "# --" line on.
func description(comment string) (string, bool) {
	var parts []string
	found := false
	for _, line := range strings.Split(comment, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "# --"); ok && !found {
			found = true
			line = rest
		} else if !found {
			continue
		} else {
			line = strings.TrimPrefix(line, "#")
		}
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, " "), found
}

func typeOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "object"
	}
	switch n.ShortTag() {
	case "!!str":
		return "string"
	case "!!int":
		return "int"
	case "!!float":
		return "number"
	case "!!bool":
		return "bool"
	case "!!null":
		return "null"
	}
	return n.ShortTag()
}

func defaultOf(n *yaml.Node) (string, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Table renders the rows as a Markdown table.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| Value | Type | Default | Description |\n")
	b.WriteString("| --- | --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", r.Key, r.Type, cell(r.Default), cell(r.Description))
	}
	return b.String()
}

func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

func replaceTable(readme []byte, table string) ([]byte, error) {
	s := string(readme)
	begin := strings.Index(s, beginMarker)
	end := strings.Index(s, endMarker)
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("markers %q and %q not found", beginMarker, endMarker)
	}
	return []byte(s[:begin+len(beginMarker)] + "\n" + table + s[end:]), nil
}
