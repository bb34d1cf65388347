package records

import "github.com/strataio/strata/gateway/internal/route"

// isPattern and matchPattern are route's topic patterns (shared with the
// auth guard, which checks the policies of the topics a pattern reads).
var (
	isPattern    = route.IsTopicPattern
	matchPattern = route.MatchTopicPattern
)
