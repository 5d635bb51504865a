// Set methods of ES2025 (Node 22) for Node 20: gitlab-ci-local 4.75.1 calls
// Set.prototype.union at start-up. Loaded with node --import; a no-op where
// node has them.
for (const [n, f] of Object.entries({
  union(o) { const r = new Set(this); for (const x of o.keys()) r.add(x); return r; },
  intersection(o) { const r = new Set(); for (const x of this) if (o.has(x)) r.add(x); return r; },
  difference(o) { const r = new Set(); for (const x of this) if (!o.has(x)) r.add(x); return r; },
  symmetricDifference(o) { const r = new Set(this); for (const x of o.keys()) { if (this.has(x)) r.delete(x); else r.add(x); } return r; },
  isSubsetOf(o) { for (const x of this) if (!o.has(x)) return false; return true; },
  isSupersetOf(o) { for (const x of o.keys()) if (!this.has(x)) return false; return true; },
  isDisjointFrom(o) { for (const x of this) if (o.has(x)) return false; return true; },
})) if (!Set.prototype[n]) Object.defineProperty(Set.prototype, n, { value: f, writable: true, configurable: true });
