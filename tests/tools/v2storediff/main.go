// v2storediff builds and reads etcd 3.4's v2 store JSON (the Data of a
// raftpb.Snapshot) with etcd's own v2store and membership packages
// (Debian's golang-etcd-server-dev), so that cetcd's codec
// (cluster/v2store.c) can be compared with etcd's on the same states.
//
//	v2storediff gen SEED COUNT
//	    prints COUNT lines "<hex> <dump>": hex is what store.Save gives
//	    after a random run of membership changes applied as etcd's
//	    RaftCluster applies them, dump the members it then holds.
//	v2storediff recover
//	    reads lines whose first field is hex JSON; prints, per line, the
//	    dump of the members etcd recovers from it (store.Recovery, then
//	    RaftCluster.Recover, as etcd does when it applies a snapshot), or
//	    "ERR" when Recovery refuses the bytes, or "PANIC".
//
// A dump is "v=<major.minor|-> m=<member>;... r=<id>,..." with members
// and removed ids in ascending id order, a member being
// "<id hex>,<V|L>,<name hex>,<peer URLs hex, by '.'>,<client URLs hex>".
//
// Build: GO111MODULE=off GOPATH=/usr/share/gocode go build
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"math/rand"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/coreos/go-semver/semver"
	"go.etcd.io/etcd/etcdserver/api/membership"
	"go.etcd.io/etcd/etcdserver/api/v2store"
	"go.etcd.io/etcd/pkg/types"
	"go.uber.org/zap"
)

func hexList(v []string) string {
	h := make([]string, len(v))
	for i, s := range v {
		h[i] = hex.EncodeToString([]byte(s))
	}
	return strings.Join(h, ".")
}

func dump(st v2store.Store) string {
	cl := membership.NewCluster(zap.NewNop(), "")
	cl.SetStore(st)
	cl.Recover(func(*zap.Logger, *semver.Version) {})
	var b strings.Builder
	if v := cl.Version(); v != nil {
		fmt.Fprintf(&b, "v=%d.%d m=", v.Major, v.Minor)
	} else {
		b.WriteString("v=- m=")
	}
	for i, m := range cl.Members() { // sorted by id
		if i > 0 {
			b.WriteString(";")
		}
		role := "V"
		if m.IsLearner {
			role = "L"
		}
		fmt.Fprintf(&b, "%x,%s,%s,%s,%s", uint64(m.ID), role, hex.EncodeToString([]byte(m.Name)),
			hexList(m.PeerURLs), hexList(m.ClientURLs))
	}
	b.WriteString(" r=")
	var removed []uint64
	if e, err := st.Get("/0/removed_members", true, true); err == nil {
		for _, n := range e.Node.Nodes {
			id, err := types.IDFromString(path.Base(n.Key))
			if err != nil {
				panic(err)
			}
			removed = append(removed, uint64(id))
		}
	}
	sort.Slice(removed, func(i, j int) bool { return removed[i] < removed[j] })
	for i, id := range removed {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%x", id)
	}
	return b.String()
}

// text is a random short string, sometimes with characters JSON escapes.
func text(r *rand.Rand) string {
	const plain = "abcdefghijklmnopqrstuvwxyz0123456789-."
	const odd = "\"\\/<>&\n\t\x01é☃\u2028"
	n := r.Intn(12)
	var b strings.Builder
	for i := 0; i < n; i++ {
		if r.Intn(8) == 0 {
			rs := []rune(odd)
			b.WriteRune(rs[r.Intn(len(rs))])
		} else {
			b.WriteByte(plain[r.Intn(len(plain))])
		}
	}
	return b.String()
}

func urls(r *rand.Rand, n int) []string {
	v := make([]string, n)
	for i := range v {
		v[i] = fmt.Sprintf("http://10.%d.%d.%d:%d", r.Intn(256), r.Intn(256), r.Intn(256), 1+r.Intn(65535))
	}
	sort.Strings(v)
	return v
}

func gen(seed int64, count int) {
	r := rand.New(rand.NewSource(seed))
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for c := 0; c < count; c++ {
		st := v2store.New("/0", "/1")
		cl := membership.NewCluster(zap.NewNop(), "")
		cl.SetStore(st)
		var ids []types.ID
		steps := r.Intn(12)
		for s := 0; s < steps; s++ {
			switch k := r.Intn(10); {
			case k < 4 || len(ids) == 0:
				id := types.ID(r.Uint64() | 1)
				m := &membership.Member{ID: id}
				m.PeerURLs = urls(r, 1+r.Intn(3))
				m.IsLearner = r.Intn(4) == 0
				if r.Intn(2) == 0 {
					m.Name = text(r)
					m.ClientURLs = urls(r, r.Intn(3))
				}
				cl.AddMember(m)
				ids = append(ids, id)
			case k < 6:
				id := ids[r.Intn(len(ids))]
				if cl.Member(id) != nil {
					cl.UpdateAttributes(id, membership.Attributes{Name: text(r), ClientURLs: urls(r, r.Intn(3))})
				}
			case k < 7:
				id := ids[r.Intn(len(ids))]
				if cl.Member(id) != nil && cl.Member(id).IsLearner {
					cl.PromoteMember(id)
				}
			case k < 8:
				id := ids[r.Intn(len(ids))]
				if cl.Member(id) != nil {
					cl.UpdateRaftAttributes(id, membership.RaftAttributes{PeerURLs: urls(r, 1+r.Intn(2)), IsLearner: cl.Member(id).IsLearner})
				}
			case k < 9:
				id := ids[r.Intn(len(ids))]
				if cl.Member(id) != nil {
					cl.RemoveMember(id)
				}
			default:
				cl.SetVersion(semver.New(fmt.Sprintf("3.%d.0", r.Intn(5))), func(*zap.Logger, *semver.Version) {})
			}
		}
		b, err := st.Save()
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(w, "%s %s\n", hex.EncodeToString(b), dump(st))
	}
}

func recoverOne(line string) (out string) {
	defer func() {
		if recover() != nil {
			out = "PANIC"
		}
	}()
	f := strings.Fields(line)
	if len(f) == 0 {
		return "ERR"
	}
	b, err := hex.DecodeString(f[0])
	if err != nil {
		return "ERR"
	}
	st := v2store.New("/0", "/1")
	if err := st.Recovery(b); err != nil {
		fmt.Fprintln(os.Stderr, "recovery:", err)
		return "ERR"
	}
	return dump(st)
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "gen" {
		seed, _ := strconv.ParseInt(os.Args[2], 10, 64)
		count, _ := strconv.Atoi(os.Args[3])
		gen(seed, count)
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "recover" {
		in := bufio.NewScanner(os.Stdin)
		in.Buffer(make([]byte, 1<<20), 1<<26)
		w := bufio.NewWriter(os.Stdout)
		defer w.Flush()
		for in.Scan() {
			fmt.Fprintln(w, recoverOne(in.Text()))
		}
		return
	}
	fmt.Fprintln(os.Stderr, "usage: v2storediff gen SEED COUNT | v2storediff recover")
	os.Exit(2)
}
