//! Latency histograms: what a worker records per event (a wake-up, a round
//! trip, a request), how it travels to the parent and the store (HdrHistogram
//! V2 encoding), and percentiles of one histogram or of many pooled.
//!
//! Values are nanoseconds with three significant digits (HdrHistogram's
//! fixed, mergeable buckets), so pooling the histograms of every process
//! of every run of a condition gives that condition's exact-bucket
//! percentiles; percentiles are never averaged.

use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};

/// Significant decimal digits kept per value.
const SIGFIG: u8 = 3;
/// Values below this many nanoseconds are not told apart (a clock read
/// costs about this much).
const LOWEST_NS: u64 = 16;

/// Up to this many events a histogram keeps the values themselves (8
/// bytes each) rather than HdrHistogram's buckets, which take some 150 KiB
/// once values span milliseconds to seconds: a model run of 10,000
/// processes with two histograms each needed 2.4 GB. Every figure is
/// computed on the histogram those values make, so both forms give the
/// same numbers.
const FEW_MAX: usize = 4096;

/// A latency histogram in nanoseconds.
#[derive(Debug, Clone)]
pub struct Latency(Repr);

#[derive(Debug, Clone)]
enum Repr {
    /// At most [`FEW_MAX`] values, in the order recorded.
    Few(Vec<u64>),
    Buckets(Histogram<u64>),
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

impl PartialEq for Latency {
    fn eq(&self, other: &Latency) -> bool {
        self.histogram() == other.histogram()
    }
}

/// An empty bucket histogram that grows to whatever it records.
fn empty_buckets() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(LOWEST_NS, LOWEST_NS * 2, SIGFIG)
        .expect("constant histogram bounds are valid");
    h.auto(true);
    h
}

/// Record `count` events of `ns` each, saturating at the top: with
/// auto-resize on, recording can only fail for values beyond u64 range of
/// the bucket arithmetic.
fn record_buckets(h: &mut Histogram<u64>, ns: u64, count: u64) {
    if count > 0 && h.record_n(ns, count).is_err() {
        let top = h.high();
        let _ = h.record_n(top, count);
    }
}

/// The usual percentiles of one histogram, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl Latency {
    /// An empty histogram that grows to whatever it records.
    pub fn new() -> Latency {
        Latency(Repr::Few(Vec::new()))
    }

    /// The bucket histogram of what was recorded (built from the values
    /// when only a few were).
    fn histogram(&self) -> std::borrow::Cow<'_, Histogram<u64>> {
        match &self.0 {
            Repr::Buckets(h) => std::borrow::Cow::Borrowed(h),
            Repr::Few(values) => {
                let mut h = empty_buckets();
                for &v in values {
                    record_buckets(&mut h, v, 1);
                }
                std::borrow::Cow::Owned(h)
            }
        }
    }

    /// The bucket form, from here on.
    fn buckets(&mut self) -> &mut Histogram<u64> {
        if let Repr::Few(_) = self.0 {
            self.0 = Repr::Buckets(self.histogram().into_owned());
        }
        match &mut self.0 {
            Repr::Buckets(h) => h,
            Repr::Few(_) => unreachable!("just made buckets"),
        }
    }

    /// Record one event of `ns` nanoseconds (0 counts as the lowest bucket).
    pub fn record_ns(&mut self, ns: u64) {
        match &mut self.0 {
            Repr::Few(values) if values.len() < FEW_MAX => values.push(ns),
            _ => record_buckets(self.buckets(), ns, 1),
        }
    }

    /// Record `count` events of `ns` nanoseconds each (a tool's histogram
    /// bucket), saturating at the top as `record_ns` does.
    pub fn record_n_ns(&mut self, ns: u64, count: u64) {
        match &mut self.0 {
            Repr::Few(values) if values.len() as u64 + count <= FEW_MAX as u64 => {
                values.extend(std::iter::repeat_n(ns, count as usize));
            }
            _ => record_buckets(self.buckets(), ns, count),
        }
    }

    /// Add every event of `other`.
    pub fn add(&mut self, other: &Latency) {
        match (&mut self.0, &other.0) {
            (Repr::Few(mine), Repr::Few(theirs)) if mine.len() + theirs.len() <= FEW_MAX => {
                mine.extend_from_slice(theirs);
            }
            // Auto-resizing histograms accept any other's range.
            _ => {
                let _ = self.buckets().add(&*other.histogram());
            }
        }
    }

    pub fn count(&self) -> u64 {
        match &self.0 {
            Repr::Few(values) => values.len() as u64,
            Repr::Buckets(h) => h.len(),
        }
    }

    /// The value at quantile `q` (0..=1), in nanoseconds; 0 when empty.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.count() == 0 {
            return 0;
        }
        self.histogram().value_at_quantile(q)
    }

    /// Events recorded below `ns`, at the histogram's resolution (3
    /// significant digits): the bucket holding `ns` counts as not below, so
    /// that differences of these counts bin every event once.
    pub fn count_below(&self, ns: u64) -> u64 {
        if self.count() == 0 {
            return 0;
        }
        let h = self.histogram();
        match h.lowest_equivalent(ns) {
            0 => 0,
            low => h.count_between(0, low - 1),
        }
    }

    /// p50, p90, p99, p99.9 and max.
    pub fn percentiles(&self) -> Percentiles {
        if self.count() == 0 {
            return Percentiles {
                count: 0,
                p50_ns: 0,
                p90_ns: 0,
                p99_ns: 0,
                p999_ns: 0,
                max_ns: 0,
            };
        }
        let h = self.histogram();
        Percentiles {
            count: h.len(),
            p50_ns: h.value_at_quantile(0.5),
            p90_ns: h.value_at_quantile(0.9),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
        }
    }

    /// HdrHistogram V2 encoding (portable; readable by other HdrHistogram
    /// implementations).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        V2Serializer::new()
            .serialize(&*self.histogram(), &mut out)
            .expect("serialising into memory cannot fail");
        out
    }

    /// The histogram `encode` wrote.
    pub fn decode(bytes: &[u8]) -> anyhow::Result<Latency> {
        let mut h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut &bytes[..])
            .map_err(|e| anyhow::anyhow!("not a latency histogram: {e:?}"))?;
        h.auto(true);
        Ok(Latency(Repr::Buckets(h)))
    }

    /// The pooled histogram of many.
    pub fn pooled<'a>(all: impl IntoIterator<Item = &'a Latency>) -> Latency {
        let mut out = Latency::new();
        for h in all {
            out.add(h);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact order statistic an HdrHistogram quantile approximates:
    /// the smallest value with at least ⌈q·n⌉ values at or below it.
    fn exact(sorted: &[u64], q: f64) -> u64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    fn within_3_digits(got: u64, want: u64) -> bool {
        (got as f64 - want as f64).abs() <= want as f64 * 1e-3 + LOWEST_NS as f64
    }

    #[test]
    fn percentiles_match_exact_order_statistics_to_three_digits() {
        // A skewed, deterministic sample: 10 µs body, a 1 % tail to 5 ms.
        let mut x = 0x2545F4914F6CDD1Du64;
        let mut values = Vec::new();
        let mut h = Latency::new();
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = if i % 100 == 0 {
                1_000_000 + x % 4_000_000
            } else {
                8_000 + x % 4_000
            };
            values.push(v);
            h.record_ns(v);
        }
        values.sort_unstable();
        let p = h.percentiles();
        assert_eq!(p.count, 20_000);
        for (got, q) in [
            (p.p50_ns, 0.5),
            (p.p90_ns, 0.9),
            (p.p99_ns, 0.99),
            (p.p999_ns, 0.999),
        ] {
            let want = exact(&values, q);
            assert!(within_3_digits(got, want), "q {q}: {got} vs {want}");
        }
        assert!(within_3_digits(p.max_ns, *values.last().unwrap()));
    }

    /// Below and above [`FEW_MAX`] events, recorded one by one, by count
    /// or pooled, the figures are those of one bucket histogram of them all.
    #[test]
    fn a_few_values_and_the_buckets_give_the_same_figures() {
        for n in [1, 7, FEW_MAX - 1, FEW_MAX, FEW_MAX + 1, 3 * FEW_MAX] {
            let values: Vec<u64> = (0..n as u64)
                .map(|i| 20 + (i * 7919) % 3_000_000_007)
                .collect();
            let mut buckets = empty_buckets();
            let mut one = Latency::new();
            let (mut a, mut b) = (Latency::new(), Latency::new());
            for (i, &v) in values.iter().enumerate() {
                record_buckets(&mut buckets, v, 1);
                one.record_ns(v);
                if i % 2 == 0 {
                    a.record_ns(v)
                } else {
                    b.record_ns(v)
                }
            }
            let direct = Latency(Repr::Buckets(buckets));
            let pooled = Latency::pooled([&a, &b]);
            for l in [&one, &pooled] {
                assert_eq!(l.percentiles(), direct.percentiles(), "n = {n}");
                assert_eq!(l.count_below(1_000_000), direct.count_below(1_000_000));
                let back = Latency::decode(&l.encode()).unwrap();
                assert_eq!(back.percentiles(), direct.percentiles());
            }
            assert_eq!(one, direct, "n = {n}");
            let mut counted = Latency::new();
            counted.record_n_ns(5_000, n as u64);
            assert_eq!(counted.count(), n as u64);
            assert_eq!(counted.quantile_ns(0.5), direct_of(5_000));
        }
        // The small form holds the values, not ~150 KiB of buckets.
        let mut small = Latency::new();
        small.record_ns(1_000_000_000);
        assert!(matches!(small.0, Repr::Few(ref v) if v.capacity() < 64));
    }

    /// The value a bucket histogram reports for one event of `ns`.
    fn direct_of(ns: u64) -> u64 {
        let mut h = empty_buckets();
        record_buckets(&mut h, ns, 1);
        h.value_at_quantile(0.5)
    }

    #[test]
    fn pooling_equals_recording_everything_in_one() {
        let mut a = Latency::new();
        let mut b = Latency::new();
        let mut all = Latency::new();
        for v in 1..=1000u64 {
            let ns = v * 1_000;
            if v % 3 == 0 {
                a.record_ns(ns)
            } else {
                b.record_ns(ns)
            }
            all.record_ns(ns);
        }
        let pooled = Latency::pooled([&a, &b]);
        assert_eq!(pooled.percentiles(), all.percentiles());
        // p50 of 1..1000 µs is 500 µs; the mean of the two halves' p50s is not.
        assert!(within_3_digits(pooled.quantile_ns(0.5), 500_000));
    }

    #[test]
    fn encoding_round_trips_and_garbage_is_refused() {
        let mut h = Latency::new();
        for v in [0, 15, 16, 1_000, 123_456, 9_000_000_000] {
            h.record_ns(v);
        }
        let bytes = h.encode();
        let back = Latency::decode(&bytes).unwrap();
        assert_eq!(back.percentiles(), h.percentiles());
        assert!(Latency::decode(b"nonsense").is_err());
        let empty = Latency::decode(&Latency::new().encode()).unwrap();
        assert_eq!(empty.percentiles().count, 0);
        assert_eq!(empty.percentiles().max_ns, 0);
    }
}
