package controller

// Event reasons on pull mirrors: the objects labelled fleetmirror.io/pull
// that ask for a source's content. ReasonInvalidAnnotation reports a
// malformed fleetmirror.io/mirror-from, ReasonClusterUnreachable a source
// cluster the hub cannot reach, as they do on sources.
const (
	// ReasonPulled: the source's content was written into the pull mirror.
	ReasonPulled = "Pulled"
	// ReasonPullNotAllowed: the source does not allow pulls into the pull
	// mirror's namespace (fleetmirror.io/allow-pull-into); the pull
	// mirror keeps what it holds.
	ReasonPullNotAllowed = "PullNotAllowed"
	// ReasonPullSourceMissing: the source does not exist, is being
	// deleted, or is not a source (no fleetmirror.io/enabled label); the
	// pull mirror keeps what it holds.
	ReasonPullSourceMissing = "PullSourceMissing"
	// ReasonPullRefused: the agent never writes this pull mirror as it is
	// set up: it is itself a source or a mirror, its source is a mirror,
	// its namespace is excluded, or its kind's constraints (a Secret's
	// type, immutable) forbid the write.
	ReasonPullRefused = "PullRefused"
	// ReasonPullConflict: fields of the content are managed by someone
	// else with other values; they are not taken over.
	ReasonPullConflict = "PullConflict"
	// ReasonPullFailed: writing the content failed; it is retried.
	ReasonPullFailed = "PullFailed"
)
