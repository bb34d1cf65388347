// Package param reads the parameters of a decoded Wire v2 request for the
// gateway's command handlers. Every failure is a typed validation error from
// the catalogue naming the parameter; nothing here panics on any input
// (FuzzReader).
//
// A Reader keeps the first failure, so a handler reads its parameters in the
// order the spec checks them and looks at Err once:
//
//	p := param.Read(c.Req, c.Command)
//	group, member, gen := p.Required(param.Group), p.Required(param.Member), p.Generation()
//	if err := p.Err(); err != nil {
//		return nil, err
//	}
package param

import (
	"strconv"
	"strings"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// Name is a parameter a command may require, with the catalogue code its
// absence is answered with (the reference broker's missing_<param> codes).
type Name struct {
	Key     string
	Missing errcode.Code
}

// The parameters commands require by name.
var (
	Topic             = Name{"topic", errcode.MissingTopic}
	Partition         = Name{"partition", errcode.MissingPartition}
	Offset            = Name{"offset", errcode.MissingOffset}
	Group             = Name{"group", errcode.MissingGroup}
	Member            = Name{"member", errcode.MissingMember}
	Message           = Name{"message", errcode.MissingMessage}
	ProducerID        = Name{"producerId", errcode.MissingProducerID}
	Broker            = Name{"broker", errcode.MissingBroker}
	ExpectedRevision  = Name{"expected_revision", errcode.MissingExpectedRevision}
	MinInSyncReplicas = Name{"min_in_sync_replicas", errcode.MissingMinInSyncReplicas}
)

// Names lists every Name above (the fuzz target reads them all).
var Names = []Name{Topic, Partition, Offset, Group, Member, Message, ProducerID, Broker, ExpectedRevision, MinInSyncReplicas}

// Reader reads one request's parameters and keeps the first failure: once
// a read failed, later reads return zero values and record nothing.
type Reader struct {
	r   *wire.Request
	cmd string
	err error
}

// Read starts reading r, a request of command cmd (named in the errors the
// reference broker attributes to the command).
func Read(r *wire.Request, cmd wire.Command) Reader {
	return Reader{r: r, cmd: cmd.String()}
}

// Err is the first failure, nil when every read succeeded.
func (p *Reader) Err() error { return p.err }

// Check records err, the failure of a check of the handler's own, in its
// place in the order: it is kept only when no earlier read failed.
func (p *Reader) Check(err error) {
	if p.err == nil {
		p.err = err
	}
}

// value returns the raw value of key and whether it is set and non-empty;
// false also once a read failed, so later reads do nothing.
func (p *Reader) value(key string) (string, bool) {
	if p.err != nil {
		return "", false
	}
	v, ok := p.r.Get(key)
	return v, ok && v != ""
}

// Required returns a non-empty parameter; missing or empty is n.Missing
// with field param.
func (p *Reader) Required(n Name) string {
	v, ok := p.value(n.Key)
	if !ok {
		p.Check(n.Missing.New(n.Key+" is required", "param", n.Key))
	}
	return v
}

// RequiredNamingCommand is Required whose error carries the command (field
// command) instead of the parameter, the reference broker's shape for
// PUBLISH's and LIST_OFFSETS' topic and ELECT_LEADER's broker.
func (p *Reader) RequiredNamingCommand(n Name) string {
	v, ok := p.value(n.Key)
	if !ok {
		p.Check(n.Missing.New(n.Key+" is required", "command", p.cmd))
	}
	return v
}

// Present returns a parameter that must be given but may be empty
// (PUBLISH's message); absent is n.Missing with field param.
func (p *Reader) Present(n Name) string {
	if p.err != nil {
		return ""
	}
	v, ok := p.r.Get(n.Key)
	if !ok {
		p.Check(n.Missing.New(n.Key+" is required", "param", n.Key))
	}
	return v
}

// RequiredUint returns a required unsigned integer: missing is n.Missing,
// malformed invalid_parameter.
func (p *Reader) RequiredUint(n Name) uint64 {
	if p.Required(n); p.err != nil {
		return 0
	}
	v, _ := p.OptUint(n.Key, 0)
	return v
}

// OptUint returns an optional unsigned integer (def when absent) and
// whether it was given.
func (p *Reader) OptUint(key string, def uint64) (uint64, bool) {
	v, ok := p.value(key)
	if !ok {
		return def, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		p.Check(Invalid(key, v, "must be a non-negative integer"))
		return 0, false
	}
	return n, true
}

// OptInt returns an optional integer within [lo, hi], def when absent.
func (p *Reader) OptInt(key string, def, lo, hi int64) int64 {
	n, ok := p.OptIntIfSet(key, lo, hi)
	if !ok {
		return def
	}
	return n
}

// OptIntIfSet returns an optional integer within [lo, hi] and whether it
// was given (and valid).
func (p *Reader) OptIntIfSet(key string, lo, hi int64) (int64, bool) {
	v, ok := p.value(key)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		p.Check(Invalid(key, v, "must be an integer in ["+strconv.FormatInt(lo, 10)+", "+strconv.FormatInt(hi, 10)+"]"))
		return 0, false
	}
	return n, true
}

// OptBool returns an optional boolean (true/false, 1/0, any case), def
// when absent, and whether it was given.
func (p *Reader) OptBool(key string, def bool) (bool, bool) {
	v, ok := p.value(key)
	if !ok {
		return def, false
	}
	b, err := strconv.ParseBool(strings.ToLower(v))
	if err != nil {
		p.Check(Invalid(key, v, "must be true or false"))
		return false, false
	}
	return b, true
}

// Partition returns the required partition id: missing is
// missing_partition, malformed or negative invalid_partition (LIST_OFFSETS'
// code, used everywhere; fields command and partition).
func (p *Reader) Partition() int32 {
	if p.Required(Partition); p.err != nil {
		return 0
	}
	n, _ := p.OptPartition()
	return n
}

// OptPartition returns an optional partition id and whether it was given.
func (p *Reader) OptPartition() (int32, bool) {
	v, ok := p.value("partition")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		p.Check(errcode.InvalidPartition.New("partition must be a non-negative integer", "command", p.cmd, "partition", Clip(v)))
		return 0, false
	}
	return int32(n), true
}

// Generation returns the required group generation: missing is
// missing_generation (spec 7, field command), malformed invalid_parameter.
func (p *Reader) Generation() uint64 {
	if _, ok := p.value("generation"); !ok {
		p.Check(errcode.MissingGeneration.New("generation is required", "command", p.cmd))
		return 0
	}
	n, _ := p.OptUint("generation", 0)
	return n
}

// Invalid is the invalid_parameter error of a value of key, saying why.
func Invalid(key, v, why string) error {
	return errcode.InvalidParameter.New(key+" "+why, "param", key, "value", Clip(v))
}

// Clip bounds a client value echoed in an error.
func Clip(v string) string {
	if len(v) > 64 {
		return v[:64]
	}
	return v
}
