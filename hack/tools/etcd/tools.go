//go:build tools

// Package tools records the commands this module builds.
package tools

import _ "go.etcd.io/etcd/server/v3"
