package tier

// StoreSegment is storeSegment for the external tests: they build a long
// manifest from real segment objects without one manifest write per
// segment.
var StoreSegment = (*Tier).storeSegment
