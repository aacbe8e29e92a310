#!/usr/bin/env python3
# The test oracle of tests/sim/reference_conformance.py: an independent model of SGLang's
# single-tier radix cache, written apart from the simulator so that agreement means something.
# Copied from the project's design material (design/reference/refsim.py of its shared folder,
# which a clone of this repository does not have); the only edit is the pointer to the semantics
# in the docstring below, which named a document outside the repository. Change it only together
# with the semantics it checks (docs/replay.md, "One request").
"""Independent reference model of the sglang-compatible single-tier radix cache (cp=1).

Semantics follow the project's replay rules (docs/replay.md, "One request"):
page-floored keys, split on partial match, match and insert refresh last_access on the
path, lock the matched node while the request is in flight, node-granular LRU eviction
of unlocked leaves with the same-call parent cascade, ties broken by node creation id,
unaligned tail page allocated for the request and freed after insert; and the two engine
scheduler rules: the match is capped at input_length - 1 tokens (at least one token is computed)
and eviction, when pages are short, targets one page more than the request needs.
Checked equal, request by request, to SGLang's RadixCache + paged allocator driven the same way
on the Mooncake conversation and synthetic traces.

usage: refsim.py TRACE.jsonl --page-tokens P --block-tokens B --capacity-pages C
prints one JSON object: requests, input_tokens, hit_tokens, token_hit_ratio, evicted_pages, uncached_requests
"""
import argparse, heapq, json, sys


class Node:
    __slots__ = ("key", "children", "parent", "lock", "last", "id")

    def __init__(self, key, parent, nid):
        self.key, self.children, self.parent = key, {}, parent
        self.lock, self.last, self.id = 0, 0, nid


class Tree:
    def __init__(self):
        self.nid = 0
        self.root = Node([], None, self._next())
        self.root.lock = 1

    def _next(self):
        self.nid += 1
        return self.nid

    def _split(self, child, m, now):
        up = Node(child.key[:m], child.parent, self._next())
        up.lock, up.last = child.lock, now
        up.parent.children[child.key[0]] = up
        child.key = child.key[m:]
        child.parent = up
        up.children[child.key[0]] = child
        return up

    def _walk(self, keys, now, split):
        node, i = self.root, 0
        node.last = now
        while i < len(keys):
            c = node.children.get(keys[i])
            if c is None:
                break
            c.last = now
            m = 0
            n = min(len(c.key), len(keys) - i)
            while m < n and c.key[m] == keys[i + m]:
                m += 1
            if m < len(c.key):
                node = self._split(c, m, now)
                i += m
                break
            node, i = c, i + m
        return i, node

    def match(self, keys, now):
        return self._walk(keys, now, True)

    def insert(self, keys, now):
        i, node = self._walk(keys, now, True)
        if i < len(keys):
            leaf = Node(keys[i:], node, self._next())
            leaf.last = now
            node.children[keys[i]] = leaf
        return len(keys) - i

    @staticmethod
    def lock(node, d):
        while node.parent is not None:
            node.lock += d
            node = node.parent

    def evict(self, want):
        heap, stack = [], [self.root]
        while stack:
            n = stack.pop()
            stack.extend(n.children.values())
            if n is not self.root and not n.children and n.lock == 0:
                heap.append((n.last, n.id, n))
        heapq.heapify(heap)
        freed = 0
        while freed < want and heap:
            _, _, n = heapq.heappop(heap)
            p = n.parent
            del p.children[n.key[0]]
            freed += len(n.key)
            if p is not self.root and not p.children and p.lock == 0:
                heapq.heappush(heap, (p.last, p.id, p))
        return freed


def page_keys(hash_ids, input_length, page, block):
    per = block // page
    full = input_length // page
    keys = []
    for h in hash_ids:
        for j in range(per):
            if len(keys) == full:
                return keys
            keys.append((h, j))
    return keys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--page-tokens", type=int, required=True)
    ap.add_argument("--block-tokens", type=int, default=512)
    ap.add_argument("--capacity-pages", type=int, required=True)
    a = ap.parse_args()
    P, cap = a.page_tokens, a.capacity_pages
    t = Tree()
    used = 0
    req = inp = hit = evicted = uncached = 0
    for now, line in enumerate(open(a.trace), start=1):
        if not line.strip():
            continue
        r = json.loads(line)
        L = r["input_length"]
        keys = page_keys(r["hash_ids"], L, P, a.block_tokens)
        total = -(-L // P)
        m, last = t.match(page_keys(r["hash_ids"], L - 1, P, a.block_tokens), now)
        req += 1
        inp += L
        hit += m * P
        t.lock(last, +1)
        need = total - m
        if need + 1 > cap - used:
            f = t.evict(need + 1 - (cap - used))
            used -= f
            evicted += f
        if need > cap - used:
            uncached += 1
            t.lock(last, -1)
            continue
        used += need
        added = t.insert(keys, now)
        used -= need - added  # tail page and nothing else is released
        t.lock(last, -1)
    print(json.dumps(dict(requests=req, input_tokens=inp, hit_tokens=hit,
                          token_hit_ratio=hit / inp if inp else 0.0,
                          evicted_pages=evicted, uncached_requests=uncached)))


if __name__ == "__main__":
    main()
