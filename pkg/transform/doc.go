// Package transform holds the rules of a source's fleetmirror.io/transform
// annotation. They serve two stages of the mirroring pipeline (parse →
// resolve → build → apply): pkg/annotations parses them with the other
// annotations (Parse), and pkg/desired applies them to the mirror built for
// each target (Rules.Apply). It depends on neither: the keys it must not
// write are passed in. It is pure: no client.
//
// # Rules
//
// The annotation holds YAML:
//
//	rules:
//	  - path: data.LOG_LEVEL
//	    value: "error"
//	  - path: data.API_URL
//	    template: "https://{{.TargetNamespace}}.api.example.com"
//	  - path: metadata.labels
//	    merge: {environment: production}
//	  - path: data.DEBUG
//	    delete: true
//	  - path: spec.template.spec.containers[0].image
//	    template: "registry.{{.TargetCluster}}.example.com/app:v1"
//	    namespacePattern: "prod-*"
//
// The YAML is read the way Kubernetes reads manifests (sigs.k8s.io/yaml),
// strictly: an unknown or repeated field is an error, and unquoted y, yes
// and on are booleans, so quote such keys and values.
//
// Each rule has a path and exactly one of:
//
//   - value: any YAML value, set at path.
//   - template: a Go text/template whose output (a string) is set at path.
//   - merge: a map merged into the map at path, key by key and recursively
//     for nested maps; a null value deletes its key, lists are replaced.
//   - delete: true, which removes the field; a missing field is not an error.
//
// Setting creates missing maps on the way, never lists: an index past the
// end of a list is an error. namespacePattern and clusterPattern are globs
// (path.Match: * and ? and [classes]) over the target's namespace and
// cluster; a rule applies only where both match, and an empty pattern
// matches everything.
//
// # Paths
//
// A path is keys joined by dots, with [N] indexing a list:
//
//	spec.template.spec.containers[0].image
//
// A bare key is letters, digits, _, - and /. Any other key, in particular
// one that contains a dot, is written in brackets as a double-quoted string
// (Go syntax, so \" and \\ escape):
//
//	data["tls.crt"]
//	metadata.annotations["example.com/owner"]
//
// Rules may not touch the mirror's identity and bookkeeping (apiVersion,
// kind, metadata.name, namespace, uid, resourceVersion, ownerReferences,
// finalizers and the like, status), nor the labels and annotations under
// the key prefix the caller reserves (fleetmirror.io/ for the agent).
//
// # Templates
//
// Templates see the Target: .TargetNamespace, .TargetCluster,
// .TargetName, .SourceNamespace, .SourceCluster, .SourceName, .Labels and
// .Annotations (a missing key is the empty string). Besides
// text/template's builtins (if, with, and, or, not, eq, len, index, slice,
// printf...) they may call upper, lower, replace, trimPrefix, trimSuffix,
// hasPrefix, hasSuffix, default, quote, b64enc and b64dec, with Sprig's
// argument order ({{ .TargetNamespace | replace "-" "_" | upper }}).
// Nothing reads files, the environment, the network or the clock. printf
// takes neither '*' widths nor [n] argument indexes, and a missing or extra
// argument is an error instead of "%!v(MISSING)" text in a mirror.
//
// # Secrets
//
// A Secret's data values are base64 in the object. Rules see decoded text:
// a value or template at data.KEY, or a value or merge at data, is written
// as plain text and encoded by Apply.
//
// # Limits
//
// Rules come from whoever may annotate a source and run in an agent that
// serves everyone, so Limits bound them: the number and size of rules, the
// time and output of each template execution and the size of the object
// after all rules. Templates may not use range, template, define or block,
// so they cannot loop or recurse; every function that builds a string is
// charged against the output budget before it builds it (an execution may
// build MaxOutput bytes in all, intermediate results included, and write
// MaxOutput bytes); and an execution that outlives its timeout is abandoned
// and stops at its next call.
package transform
