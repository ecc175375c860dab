// Package annotations is the first stage of the mirroring pipeline: it holds
// the label and annotation keys of the fleetmirror contract and parses a
// source object's annotations into a mirroring request, the transform rules
// included (with pkg/transform). It is pure: no client.
package annotations
