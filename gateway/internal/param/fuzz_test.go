package param

import (
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// FuzzReader drives every read of a Reader with arbitrary command texts: no
// panic, and every failure a typed error.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"CONSUME topic=t* partition=0 offset=5 member=m group=g batch=10 wait_ms=100",
		"PUBLISH topic=t acks=all producerId=p seqNum=1 epoch=-1 isIdempotent=true partition=2 message=hello world",
		"BATCH_COMMIT topic=t group=g member=m generation=x P0:1",
		"CREATE topic=a.b partitions=-1 retention_hours=99999999999999999999 idempotent=maybe",
		"CONSUME topic=?? partition=99999999999 offset=-1 member=",
		"COMMIT_OFFSET topic=t partition=0 group=g offset=18446744073709551616 member=m generation=3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		cmd, r, err := wire.ParseText(text)
		if err != nil {
			return
		}
		reads := []func(*Reader){
			func(p *Reader) { p.Generation() },
			func(p *Reader) { p.OptBool("idempotent", false) },
			func(p *Reader) { p.OptIntIfSet("partitions", 1, 1<<20) },
			func(p *Reader) { p.OptInt("epoch", 0, -1<<63, 1<<63-1) },
			func(p *Reader) { p.OptUint("seqNum", 0) },
			func(p *Reader) { p.OptPartition() },
			func(p *Reader) { p.Partition() },
		}
		for _, n := range Names {
			reads = append(reads, func(p *Reader) { p.Required(n) }, func(p *Reader) { p.RequiredNamingCommand(n) },
				func(p *Reader) { p.Present(n) }, func(p *Reader) { p.RequiredUint(n) })
		}
		for k := range r.All() {
			n := Name{Key: k, Missing: errcode.MissingParameter}
			reads = append(reads, func(p *Reader) { p.Required(n) })
		}
		all := Read(&r, cmd)
		for _, read := range reads {
			p := Read(&r, cmd)
			read(&p)
			read(&all)
			for _, err := range []error{p.Err(), all.Err()} {
				if _, ok := errcode.As(err); err != nil && !ok {
					t.Fatalf("untyped error %T: %v", err, err)
				}
			}
		}
	})
}
