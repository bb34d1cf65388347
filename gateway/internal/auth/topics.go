package auth

import (
	"context"

	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// RouterTopics looks topic policies up through the gateway's router: the
// metadata cache, then metad for a name the cache does not hold yet (a
// topic just created through another gateway must not escape its ACL).
func RouterTopics(r route.Router) Topics { return routerTopics{r} }

type routerTopics struct{ r route.Router }

func (t routerTopics) Policies(ctx context.Context, topic string) ([]Policy, error) {
	if !route.IsTopicPattern(topic) {
		tp, err := t.r.LookupTopic(ctx, topic)
		if err != nil {
			if errcode.CodeOf(err) == errcode.TopicNotFound.Name() {
				return nil, nil
			}
			return nil, err
		}
		return []Policy{policyOf(tp)}, nil
	}
	v := t.r.Cache().View()
	if !v.Ready() {
		return nil, errcode.ClusterMetadataUnavailable.New("topic metadata not synced with metad yet", "command", "CONSUME")
	}
	var out []Policy
	for _, tp := range route.ClientTopics(v) {
		if route.MatchTopicPattern(topic, tp.GetConfig().GetName()) {
			out = append(out, policyOf(tp))
		}
	}
	return out, nil
}

func policyOf(t *metav1.Topic) Policy {
	c := t.GetConfig()
	return Policy{Topic: c.GetName(), AuthPolicy: c.GetAuthPolicy(), ReadACL: c.GetReadAcl(), WriteACL: c.GetWriteAcl()}
}
