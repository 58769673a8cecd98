// lockclient drives etcd's v3lock and v3election gRPC services (etcd
// 3.4's v3lockpb and v3electionpb client stubs, Debian's
// golang-etcd-server-dev) on one member, cetcd or Debian's etcd, and
// prints one line per fact it checked, without revisions or lease IDs,
// so that the transcripts of the two servers can be compared line by
// line. It exits 1 when a fact is not what etcd's semantics say.
//
//	lockclient -endpoint E
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/clientv3"
	epb "go.etcd.io/etcd/etcdserver/api/v3election/v3electionpb"
	lpb "go.etcd.io/etcd/etcdserver/api/v3lock/v3lockpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var failed bool

func say(format string, a ...interface{}) { fmt.Printf(format+"\n", a...) }

func check(ok bool, format string, a ...interface{}) {
	if ok {
		say("ok   "+format, a...)
	} else {
		failed = true
		say("FAIL "+format, a...)
	}
}

// errText is what a client sees of an error: its gRPC code and text.
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	if s, ok := status.FromError(err); ok {
		return s.Code().String() + ": " + s.Message()
	}
	return err.Error()
}

// deadlineText is errText for a call whose deadline passed. Two timers
// race there: the client's own, which ends the call as DeadlineExceeded,
// and the server's copy of it (grpc-timeout), whose handler etcd 3.4
// answers with the bare context error that grpc-go sends as Unknown. Which
// one the client sees first is timing, on etcd and on cetcd alike, so the
// transcript names the outcome, not the winner; any other code or message
// is printed as it came.
func deadlineText(err error) string {
	if s, ok := status.FromError(err); ok && s.Message() == context.DeadlineExceeded.Error() &&
		(s.Code() == codes.DeadlineExceeded || s.Code() == codes.Unknown) {
		return "deadline exceeded (DeadlineExceeded from the client or Unknown from the server)"
	}
	return errText(err)
}

func main() {
	ep := flag.String("endpoint", "127.0.0.1:2379", "client endpoint")
	flag.Parse()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockclient:", err)
		os.Exit(2)
	}
	defer cli.Close()
	lk := lpb.NewLockClient(cli.ActiveConnection())
	el := epb.NewElectionClient(cli.ActiveConnection())
	bg := context.Background()
	grant := func(ttl int64) clientv3.LeaseID {
		r, err := cli.Grant(bg, ttl)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockclient: grant:", err)
			os.Exit(2)
		}
		return r.ID
	}
	keyOf := func(name string, l clientv3.LeaseID) string { return fmt.Sprintf("%s/%x", name, int64(l)) }
	exists := func(key string) bool {
		r, err := cli.Get(bg, key)
		return err == nil && len(r.Kvs) == 1
	}

	// ---- Lock: two clients contend, in order; Unlock hands it over
	l1, l2, l1b := grant(30), grant(30), grant(30)
	r1, err := lk.Lock(bg, &lpb.LockRequest{Name: []byte("lk"), Lease: int64(l1)})
	check(err == nil && string(r1.GetKey()) == keyOf("lk", l1), "first Lock holds at once with key <name>/<lease hex> (%s)", errText(err))
	check(err == nil && r1.Header.Revision > 0 && r1.Header.ClusterId != 0, "the LockResponse has a header")
	got2 := make(chan *lpb.LockResponse, 1)
	go func() {
		r, err := lk.Lock(bg, &lpb.LockRequest{Name: []byte("lk"), Lease: int64(l2)})
		if err != nil {
			say("second Lock: %s", errText(err))
			r = nil
		}
		got2 <- r
	}()
	select {
	case <-got2:
		check(false, "the second Lock waits while the first holds")
	case <-time.After(700 * time.Millisecond):
		check(exists(keyOf("lk", l2)), "the second Lock waits, with its key in place")
	}
	// another call on the same connection is served meanwhile
	_, err = cli.Put(bg, "other", "x")
	check(err == nil, "a Put is served while a Lock waits")
	ur, err := lk.Unlock(bg, &lpb.UnlockRequest{Key: r1.GetKey()})
	check(err == nil && ur.Header.Revision > r1.Header.Revision, "Unlock answers with a later revision (%s)", errText(err))
	select {
	case r := <-got2:
		check(r != nil && string(r.Key) == keyOf("lk", l2) && r.Header.Revision >= ur.Header.Revision,
			"Unlock hands the lock to the second (header at or after the unlock)")
	case <-time.After(5 * time.Second):
		check(false, "Unlock hands the lock to the second")
	}
	check(!exists(keyOf("lk", l1)), "the first key is gone")
	r1b, err := lk.Lock(bg, &lpb.LockRequest{Name: []byte("lk"), Lease: int64(l2)})
	check(err == nil && string(r1b.GetKey()) == keyOf("lk", l2), "Lock again with the holder's lease: held at once (%s)", errText(err))
	// names of every length up to 200 bytes: each answer's key whole,
	// and Unlock with it deletes it
	bad := ""
	for n := 1; n <= 200 && bad == ""; n++ {
		name := strings.Repeat("n", n)
		rl, err := lk.Lock(bg, &lpb.LockRequest{Name: []byte(name), Lease: int64(l1b)})
		if err != nil || string(rl.GetKey()) != keyOf(name, l1b) {
			bad = fmt.Sprintf(": a %d-byte name: %q (%s)", n, rl.GetKey(), errText(err))
			break
		}
		if _, err = lk.Unlock(bg, &lpb.UnlockRequest{Key: rl.GetKey()}); err != nil || exists(keyOf(name, l1b)) {
			bad = fmt.Sprintf(": Unlock of a %d-byte name's key (%s)", n, errText(err))
		}
	}
	check(bad == "", "Lock answers the key whole for names of 1 to 200 bytes, Unlock deletes it%s", bad)
	_, err = lk.Unlock(bg, &lpb.UnlockRequest{Key: nil})
	say("Unlock without a key: %s", errText(err))
	_, err = lk.Lock(bg, &lpb.LockRequest{Name: []byte("lk9"), Lease: 0x1234567})
	say("Lock with a lease that does not exist: %s", errText(err))

	// ---- a holder whose lease expires loses the lock
	short := grant(2)
	_, err = lk.Lock(bg, &lpb.LockRequest{Name: []byte("lk2"), Lease: int64(short)})
	check(err == nil, "Lock with a 2 s lease holds (%s)", errText(err))
	l4 := grant(30)
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(bg, 15*time.Second)
	r4, err := lk.Lock(ctx, &lpb.LockRequest{Name: []byte("lk2"), Lease: int64(l4)})
	cancel()
	check(err == nil && string(r4.GetKey()) == keyOf("lk2", l4) && time.Since(t0) > 500*time.Millisecond,
		"the waiter gets the lock once the holder's lease expired (%s)", errText(err))
	check(!exists(keyOf("lk2", short)), "the expired holder's key is gone")

	// ---- a cancelled waiter leaves no key behind once its lease is revoked
	l5 := grant(30)
	ctx, cancel = context.WithTimeout(bg, time.Second)
	_, err = lk.Lock(ctx, &lpb.LockRequest{Name: []byte("lk2"), Lease: int64(l5)})
	cancel()
	say("a waiter whose deadline passes: %s", deadlineText(err))
	waitGone := func(key string) bool {
		for i := 0; i < 50; i++ {
			if !exists(key) {
				return true
			}
			time.Sleep(100 * time.Millisecond)
		}
		return false
	}
	say("its key deleted by the server (Mutex.Lock unlocks when its wait fails): %v", waitGone(keyOf("lk2", l5)))
	_, err = cli.Revoke(bg, l5)
	check(err == nil && !exists(keyOf("lk2", l5)), "no key of it once its lease is revoked")
	_, err = lk.Unlock(bg, &lpb.UnlockRequest{Key: r4.GetKey()})
	check(err == nil, "Unlock of the waiter that got it")

	// ---- Election: two candidates, an observer
	ectx, ecancel := context.WithCancel(bg)
	obs, err := el.Observe(ectx, &epb.LeaderRequest{Name: []byte("el")})
	check(err == nil, "Observe starts")
	seen := make(chan string, 16)
	go func() {
		for {
			r, err := obs.Recv()
			if err != nil {
				close(seen)
				return
			}
			seen <- string(r.Kv.Key[len("el/"):]) + "=" + string(r.Kv.Value)
		}
	}()
	_, err = el.Leader(bg, &epb.LeaderRequest{Name: []byte("el")})
	say("Leader before any candidate: %s", errText(err))
	la, lb, ll := grant(30), grant(30), grant(30)
	bad = ""
	for n := 1; n <= 200 && bad == ""; n++ {
		name := "e" + strings.Repeat("n", n-1)
		cl, err := el.Campaign(bg, &epb.CampaignRequest{Name: []byte(name), Lease: int64(ll), Value: []byte("l")})
		if err != nil || cl.Leader == nil || string(cl.Leader.Key) != keyOf(name, ll) || string(cl.Leader.Name) != name {
			bad = fmt.Sprintf(": a %d-byte name: %v (%s)", n, cl.GetLeader(), errText(err))
		}
	}
	check(bad == "", "Campaign answers the name and key whole for names of 1 to 200 bytes%s", bad)
	ca, err := el.Campaign(bg, &epb.CampaignRequest{Name: []byte("el"), Lease: int64(la), Value: []byte("a")})
	check(err == nil && ca.Leader != nil && string(ca.Leader.Key) == keyOf("el", la) &&
		string(ca.Leader.Name) == "el" && ca.Leader.Lease == int64(la) && ca.Leader.Rev == ca.Header.Revision,
		"Campaign of a leads at once: LeaderKey {name, key, rev, lease} (%s)", errText(err))
	gotB := make(chan *epb.CampaignResponse, 1)
	go func() {
		r, err := el.Campaign(bg, &epb.CampaignRequest{Name: []byte("el"), Lease: int64(lb), Value: []byte("b")})
		if err != nil {
			say("Campaign of b: %s", errText(err))
		}
		gotB <- r
	}()
	select {
	case <-gotB:
		check(false, "Campaign of b waits while a leads")
	case <-time.After(700 * time.Millisecond):
		check(true, "Campaign of b waits while a leads")
	}
	_, err = el.Proclaim(bg, &epb.ProclaimRequest{Leader: ca.Leader, Value: []byte("a2")})
	check(err == nil, "Proclaim by a (%s)", errText(err))
	lr, err := el.Leader(bg, &epb.LeaderRequest{Name: []byte("el")})
	check(err == nil && string(lr.Kv.Value) == "a2", "Leader says a2 (%s)", errText(err))
	rr, err := el.Resign(bg, &epb.ResignRequest{Leader: ca.Leader})
	check(err == nil && rr.Header != nil, "Resign by a (%s)", errText(err))
	var cb *epb.CampaignResponse
	select {
	case cb = <-gotB:
		check(cb != nil && string(cb.Leader.Key) == keyOf("el", lb), "Campaign of b returns once a resigned")
	case <-time.After(5 * time.Second):
		check(false, "Campaign of b returns once a resigned")
	}
	_, err = el.Proclaim(bg, &epb.ProclaimRequest{Leader: ca.Leader, Value: []byte("stale")})
	say("Proclaim with a's resigned key: %s", errText(err))
	_, err = el.Proclaim(bg, &epb.ProclaimRequest{Value: []byte("x")})
	say("Proclaim without a leader: %s", errText(err))
	_, err = el.Resign(bg, &epb.ResignRequest{})
	say("Resign without a leader: %s", errText(err))
	_, err = el.Resign(bg, &epb.ResignRequest{Leader: ca.Leader})
	say("Resign with a's resigned key again: %s", errText(err))
	if cb != nil {
		_, err = el.Proclaim(bg, &epb.ProclaimRequest{Leader: cb.Leader, Value: []byte("b2")})
		check(err == nil, "Proclaim by b (%s)", errText(err))
		_, err = el.Resign(bg, &epb.ResignRequest{Leader: cb.Leader})
		check(err == nil, "Resign by b")
	}
	_, err = el.Leader(bg, &epb.LeaderRequest{Name: []byte("el")})
	say("Leader after both resigned: %s", errText(err))
	// the same candidate again with its old value then another: Campaign
	// on an existing key proclaims the new value
	lc := grant(30)
	cc, err := el.Campaign(bg, &epb.CampaignRequest{Name: []byte("el"), Lease: int64(lc), Value: []byte("c")})
	check(err == nil, "Campaign of c (%s)", errText(err))
	cc2, err := el.Campaign(bg, &epb.CampaignRequest{Name: []byte("el"), Lease: int64(lc), Value: []byte("c2")})
	check(err == nil && cc2.Leader.Rev == cc.Leader.Rev, "Campaign of c again keeps its key's revision (%s)", errText(err))
	_, err = cli.Revoke(bg, lc)
	check(err == nil, "c's lease revoked")

	want := []string{
		fmt.Sprintf("%x=a", int64(la)), fmt.Sprintf("%x=a2", int64(la)),
		fmt.Sprintf("%x=b", int64(lb)), fmt.Sprintf("%x=b2", int64(lb)),
		fmt.Sprintf("%x=c", int64(lc)), fmt.Sprintf("%x=c2", int64(lc)),
	}
	var got []string
	deadline := time.After(5 * time.Second)
collect:
	for len(got) < len(want) {
		select {
		case v, ok := <-seen:
			if !ok {
				break collect
			}
			got = append(got, v)
		case <-deadline:
			break collect
		}
	}
	check(strings.Join(got, " ") == strings.Join(want, " "), "Observe saw every leader and value in order: %d of %d", len(got), len(want))
	if strings.Join(got, " ") != strings.Join(want, " ") {
		say("     got  %v", got)
		say("     want %v", want)
	}
	ecancel()
	if failed {
		os.Exit(1)
	}
}
