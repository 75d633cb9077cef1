package emulator_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/localseg"
)

// healRig is a shard on the S3 emulator with a few sealed segments, all
// durable in the bucket.
type healRig struct {
	v     *env
	opts  bucketlog.Options
	reg   *prometheus.Registry
	l     *bucketlog.Log
	execs []string
	want  []localseg.Record
	seg   uint64 // the segment the tests damage (the writer's second)
	path  string
	good  []byte
}

func newHealRig(t *testing.T) *healRig {
	r := &healRig{v: newEnv(t, backends[0], true), reg: prometheus.NewRegistry(), execs: execsOf(0, 1, 3)}
	r.opts = bucketlog.Options{Dir: t.TempDir(), Bucket: r.v.b, SegmentMaxBytes: evictSegMax, NoBackground: true, Registerer: r.reg}
	r.l = open(t, r.opts)
	r.seg = segN(t, r.l, 2)
	ctx := ctxT(t)
	for i := range 300 {
		e := evictEvent(r.execs, i)
		res, err := r.l.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		r.want = append(r.want, localseg.Record{Seq: res.Seq, ExecutionID: e.ExecutionID, TransactionID: e.TransactionID, Payload: e.Payload})
	}
	if _, err := r.l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	snap, err := r.l.Store().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if sealed := len(snap.Segments) - 1; sealed < 3 || r.l.Status().SegmentsDurable != sealed {
		t.Fatalf("%d sealed segments, %d durable in the bucket: want every one of at least 3", sealed, r.l.Status().SegmentsDurable)
	}
	r.path = filepath.Join(r.l.Dir(), localseg.SegmentFileName(r.seg))
	if r.good, err = os.ReadFile(r.path); err != nil {
		t.Fatal(err)
	}
	return r
}

// damage flips one byte in the middle of the segment file.
func (r *healRig) damage(t *testing.T) []byte {
	t.Helper()
	b := bytes.Clone(r.good)
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(r.path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

func (r *healRig) metric(t *testing.T, name string) float64 {
	return fltMetrics(t, r.reg)[name]
}

// TestHealLocalSegmentFromBucket: a flipped byte in a sealed segment that is
// durable in the bucket — found by a read while the shard runs (its index
// built before or after the damage), or at a restart — is replaced by the
// verified bucket copy; every read path answers byte for byte, the metric
// counts it and the file is the sealed bytes again.
func TestHealLocalSegmentFromBucket(t *testing.T) {
	for _, when := range []string{"first read", "index built", "restart"} {
		t.Run(when, func(t *testing.T) {
			r := newHealRig(t)
			switch when {
			case "index built":
				readAllBack(t, r.l, r.execs, r.want)
				r.damage(t)
			case "first read":
				r.damage(t)
			case "restart":
				closeLog(t, r.l)
				r.damage(t)
				r.reg = prometheus.NewRegistry()
				r.opts.Registerer = r.reg
				r.l = open(t, r.opts)
			}
			readAllBack(t, r.l, r.execs, r.want)
			if got := r.metric(t, "local_segments_healed_total"); got != 1 {
				t.Fatalf("local_segments_healed_total = %v, want 1", got)
			}
			if got, _ := os.ReadFile(r.path); !bytes.Equal(got, r.good) {
				t.Fatal("the segment file is not the sealed bytes after healing")
			}
			if st := r.l.Status(); st.State != "ready" || len(st.DamagedSegments) != 0 {
				t.Fatalf("status after healing: %+v", st)
			}
		})
	}
}

// TestHealRefusedWhenTheBucketCopyIsDamaged: the bucket's copy reads back
// damaged too. Nothing is replaced; the shard stays ready (appends go on)
// and reports the segment (status, Health, metric); reads that need none of
// its damaged frames answer, one through it fails as a storage error. Once
// the bucket reads intact again, the next pass heals it and nothing was
// lost.
func TestHealRefusedWhenTheBucketCopyIsDamaged(t *testing.T) {
	r := newHealRig(t)
	ctx := ctxT(t)
	rule := r.v.fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpRead, Kind: faultbucket.Corrupt, Key: blobtier.SegmentKey(0, r.seg)})
	damaged := r.damage(t)

	if _, err := r.l.Scan(ctx, 0, 1000); err == nil || bucketlog.HTTPStatus(err) != 503 || !errors.Is(err, localseg.ErrCorrupt) {
		t.Fatalf("a scan through the damaged segment: %v (status %d), want corruption (503)", err, bucketlog.HTTPStatus(err))
	}
	last := r.want[len(r.want)-20:]
	p, err := r.l.Scan(ctx, last[0].Seq-1, 100)
	if err != nil {
		t.Fatalf("a scan far past the damaged segment: %v", err)
	}
	sameRecords(t, "scan past", p.Records, last)
	x := last[len(last)-1].ExecutionID
	var w []localseg.Record
	for _, rec := range last {
		if rec.ExecutionID == x {
			w = append(w, rec)
		}
	}
	res, err := r.l.ReadExecution(ctx, x, last[0].Seq-1, 100)
	if err != nil {
		t.Fatalf("an execution read past the damaged segment: %v", err)
	}
	sameRecords(t, "execution past", res.Page.Records, w)
	if _, err := r.l.Pull(ctx, "late", 0); err != nil { // creates the consumer
		t.Fatal(err)
	}
	if _, err := r.l.Ack(ctx, "late", last[0].Seq-1); err != nil {
		t.Fatal(err)
	}
	pr, err := r.l.Pull(ctx, "late", 100)
	if err != nil {
		t.Fatalf("a pull past the damaged segment: %v", err)
	}
	sameRecords(t, "pull past", pr.Records, last)
	if _, err := r.l.Append(ctx, evictEvent(r.execs, 1000)); err != nil {
		t.Fatalf("an append with a damaged segment: %v", err)
	}
	if ok, why := r.l.Ready(); !ok {
		t.Fatalf("not ready with a damaged segment: %s", why)
	}
	if ok, _ := r.l.Health(); ok {
		t.Fatal("Health reports the shard whole with a damaged segment")
	}
	if st := r.l.Status(); st.State != "degraded" || len(st.DamagedSegments) != 1 || st.DamagedSegments[0] != r.seg {
		t.Fatalf("status: %+v, want degraded naming segment %d", st, r.seg)
	}
	if got := r.metric(t, "local_segments_damaged"); got != 1 {
		t.Fatalf("local_segments_damaged = %v", got)
	}
	if got := r.metric(t, "local_segments_healed_total"); got != 0 {
		t.Fatalf("local_segments_healed_total = %v with the bucket copy damaged", got)
	}
	if got, _ := os.ReadFile(r.path); !bytes.Equal(got, damaged) {
		t.Fatal("the damaged file was replaced by a copy that does not verify")
	}

	r.v.fb.Remove(rule)
	if _, err := r.l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if got := r.metric(t, "local_segments_healed_total"); got != 1 {
		t.Fatalf("after the bucket recovered: local_segments_healed_total = %v", got)
	}
	if st := r.l.Status(); st.State != "ready" || len(st.DamagedSegments) != 0 {
		t.Fatalf("status after healing: %+v", st)
	}
	all := scanAll(t, r.l) // the events, and the one appended above
	sameRecords(t, "after healing", all.Records[:len(r.want)], r.want)
}

// TestHealWaitsUntilTheSegmentIsDurable: a segment whose object is in the
// bucket but not durable (its read-back after the put failed) is not
// healed from that object while the shard runs, even intact; the next
// start verifies the object against the segment's record and heals it.
func TestHealWaitsUntilTheSegmentIsDurable(t *testing.T) {
	v := newEnv(t, backends[0], true)
	opts := bucketlog.Options{Dir: t.TempDir(), Bucket: v.b, SegmentMaxBytes: evictSegMax, NoBackground: true}
	l := open(t, opts)
	seg := segN(t, l, 1)
	execs := execsOf(0, 1, 3)
	ctx := ctxT(t)
	var want []localseg.Record
	for i := range 60 {
		e := evictEvent(execs, i)
		res, err := l.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, localseg.Record{Seq: res.Seq, ExecutionID: e.ExecutionID, TransactionID: e.TransactionID, Payload: e.Payload})
	}
	key := blobtier.SegmentKey(0, seg)
	rule := v.fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpRead, Kind: faultbucket.Refuse, Key: key})
	l.Ship(ctx, false) // the put lands, its read-back fails
	v.fb.Remove(rule)
	if _, err := v.b.Stat(ctx, key); err != nil {
		t.Fatalf("the segment object is not in the bucket: %v", err)
	}
	if l.Status().SegmentsDurable != 0 {
		t.Fatalf("segment %d counts durable after a failed read-back", seg)
	}
	path := filepath.Join(l.Dir(), localseg.SegmentFileName(seg))
	good, _ := os.ReadFile(path)
	bad := bytes.Clone(good)
	bad[len(bad)/3] ^= 0x08
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Scan(ctx, 0, 1000); err == nil {
		t.Fatal("a read through the damaged segment succeeded before it was durable")
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, bad) {
		t.Fatal("healed from an object that is not durable")
	}
	if st := l.Status(); len(st.DamagedSegments) != 1 {
		t.Fatalf("status %+v", st)
	}
	// The uploader does not put a damaged local segment again (it fails
	// its checks before the upload), so it stays not durable while the
	// shard runs: a pass does not heal it.
	l.Ship(ctx, false)
	if got, _ := os.ReadFile(path); !bytes.Equal(got, bad) {
		t.Fatal("a pass healed from an object that is not durable")
	}
	// A restart's reconcile verifies the object against the segment's
	// record (length, xxh64, frames, epoch on the lineage): durable, and
	// healed after the verdict.
	if err := l.Close(); err == nil {
		t.Fatal("Close's last shipment uploaded a damaged segment")
	}
	opts.Registerer = prometheus.NewRegistry()
	l = open(t, opts)
	p, err := l.Scan(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "after healing", p.Records, want)
	if got, _ := os.ReadFile(path); !bytes.Equal(got, good) {
		t.Fatal("not healed at the restart")
	}
	if got := fltMetrics(t, opts.Registerer.(*prometheus.Registry))["local_segments_healed_total"]; got != 1 {
		t.Fatalf("local_segments_healed_total = %v", got)
	}
}
