package member_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// collection matches the path of a list or watch of Secrets or ConfigMaps,
// cluster-wide or in one namespace.
var collection = regexp.MustCompile(`^/api/v1/(namespaces/[^/]+/)?(secrets|configmaps)$`)

// Efficiency: every list and watch of a mirrored kind that any agent of this
// suite sent selects on our labels server side, and namespaces are listed and
// watched as metadata only. The file sorts last so that the agents of every
// other test are checked too.
func TestListsAndWatchesAreFiltered(t *testing.T) {
	g := NewWithT(t)
	// Some activity of the running agent, so that it is checked too.
	ns := namespaces(t, "watch", nil, "src", "a")
	create(t, sourceSecret(ns[0], "w", ns[1], map[string]string{"k": "v"}))
	eventuallySecret(t, ns[1], "w", nil)

	var kinds, pulls, nsLists int
	for _, r := range allRequests() {
		if r.Method != http.MethodGet {
			continue
		}
		if collection.MatchString(r.URL.Path) {
			kinds++
			sel := r.URL.Query().Get("labelSelector")
			if strings.Contains(r.URL.Path, "/namespaces/") {
				// The sources of a MirrorPolicy: in its namespace, by
				// name or by the policy's own selector.
				g.Expect(strings.HasPrefix(r.URL.Query().Get("fieldSelector"), "metadata.name=") || sel != "").To(BeTrue(),
					"unfiltered list or watch in a namespace: GET %s", r.URL.RequestURI())
				continue
			}
			if strings.Contains(r.Accept, "as=PartialObjectMetadata") &&
				(strings.HasPrefix(r.URL.Query().Get("fieldSelector"), "metadata.name=") || sel != "") {
				// A MirrorPolicy's trigger: metadata only, by the
				// trigger's names or its own selector.
				continue
			}
			// Sources select on the enabled label alone: a mirror that
			// carries it is listed too, so that it is refused out loud.
			// Mirrors select on our labels and our writer, pull mirrors on
			// the pull label.
			g.Expect(sel).To(SatisfyAny(Equal("fleetmirror.io/enabled=true"), ContainSubstring("fleetmirror.io/mirror=true"), Equal("fleetmirror.io/pull=true")),
				"unfiltered list or watch: GET %s", r.URL.RequestURI())
			if sel == "fleetmirror.io/pull=true" {
				pulls++
			}
			if strings.Contains(sel, "fleetmirror.io/mirror") {
				g.Expect(sel).To(ContainSubstring("fleetmirror.io/managed-by="), "mirrors of this writer only: GET %s", r.URL.RequestURI())
			}
		}
		if r.URL.Path == "/api/v1/namespaces" {
			nsLists++
			g.Expect(r.Accept).To(ContainSubstring("as=PartialObjectMetadata"), "namespaces as metadata only: GET %s", r.URL.RequestURI())
		}
	}
	g.Expect(kinds).To(BeNumerically(">=", 6), "lists and watches of secrets and configmaps were recorded")
	g.Expect(pulls).To(BeNumerically(">=", 2), "lists and watches of pull mirrors were recorded")
	g.Expect(nsLists).To(BeNumerically(">=", 1), "lists of namespaces were recorded")
}
