// permdiff decides permission checks with etcd 3.4's own interval tree
// (pkg/adt from Debian's golang-etcd-server-dev), as etcd's auth store
// merges a user's permissions (getMergedPerms) and checks a request
// (isRangeOpPermitted: checkKeyPoint, checkKeyInterval), so that cetcd's
// permission cache can be compared with it.
//
// Input, one case per line: "<perms>|<queries>", each a space-separated
// list of "<type>:<key hex>:<range_end hex>" ("-" for empty bytes); type
// 0 READ, 1 WRITE, 2 READWRITE for a permission, 0 or 1 for a query.
// Output, one line per case: a '1' (permitted) or '0' per query.
//
// Build: GO111MODULE=off GOPATH=/usr/share/gocode go build
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"go.etcd.io/etcd/pkg/adt"
)

type item struct {
	typ      byte
	key, end []byte
}

func parse(list string) []item {
	var out []item
	for _, f := range strings.Fields(list) {
		p := strings.Split(f, ":")
		dec := func(s string) []byte {
			if s == "-" {
				return []byte{}
			}
			b, err := hex.DecodeString(s)
			if err != nil {
				panic(err)
			}
			return b
		}
		out = append(out, item{p[0][0] - '0', dec(p[1]), dec(p[2])})
	}
	return out
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for in.Scan() {
		halves := strings.SplitN(in.Text(), "|", 2)
		trees := [2]adt.IntervalTree{adt.NewIntervalTree(), adt.NewIntervalTree()}
		for _, p := range parse(halves[0]) {
			var rangeEnd []byte
			if len(p.end) != 1 || p.end[0] != 0 {
				rangeEnd = p.end
			}
			var ivl adt.Interval
			if len(p.end) != 0 {
				ivl = adt.NewBytesAffineInterval(p.key, rangeEnd)
			} else {
				ivl = adt.NewBytesAffinePoint(p.key)
			}
			if p.typ == 0 || p.typ == 2 {
				trees[0].Insert(ivl, struct{}{})
			}
			if p.typ == 1 || p.typ == 2 {
				trees[1].Insert(ivl, struct{}{})
			}
		}
		var line []byte
		for _, q := range parse(halves[1]) {
			t := trees[q.typ]
			var ok bool
			if len(q.end) == 0 {
				ok = t.Intersects(adt.NewBytesAffinePoint(q.key))
			} else {
				end := q.end
				if len(end) == 1 && end[0] == 0 {
					end = nil
				}
				ok = t.Contains(adt.NewBytesAffineInterval(q.key, end))
			}
			if ok {
				line = append(line, '1')
			} else {
				line = append(line, '0')
			}
		}
		fmt.Fprintf(w, "%s\n", line)
	}
}
