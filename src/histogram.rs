//! The latency histogram's portable form: HdrHistogram's V2 compressed
//! encoding in base64, the same strings other HdrHistogram tools read, so a
//! saved run can be merged and re-analysed later. A pure module below the
//! collector and the reports, which both hold histograms as values.

use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};

/// Encodes a histogram; an empty string if encoding fails (it cannot for
/// histograms this crate builds, whose bounds are valid).
pub fn encode(hist: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    match V2DeflateSerializer::new().serialize(hist, &mut bytes) {
        Ok(_) => base64::engine::general_purpose::STANDARD.encode(bytes),
        Err(_) => String::new(),
    }
}

/// Why a saved histogram cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("histogram is not base64: {0}")]
    Base64(base64::DecodeError),
    #[error("histogram is not HdrHistogram V2: {0:?}")]
    Hdr(hdrhistogram::serialization::DeserializeError),
}

/// Decodes what [`encode`] wrote.
pub fn decode(text: &str) -> Result<Histogram<u64>, DecodeError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(DecodeError::Base64)?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(DecodeError::Hdr)
}

/// A histogram held as a value in memory and written as the V2-deflate
/// base64 string at the file boundary (serde does both ways), so readers of
/// a saved report get a histogram, not text to decode again.
#[derive(Clone, Debug)]
pub struct EncodedHistogram(pub Histogram<u64>);

impl Default for EncodedHistogram {
    fn default() -> Self {
        EncodedHistogram(crate::recorder::new_latency_histogram())
    }
}

impl PartialEq for EncodedHistogram {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl serde::Serialize for EncodedHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode(&self.0))
    }
}

impl<'de> serde::Deserialize<'de> for EncodedHistogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        decode(&text)
            .map(EncodedHistogram)
            .map_err(serde::de::Error::custom)
    }
}

/// One interval's histogram, kept in memory in its compact encoded form
/// (V2 deflate: about 1.5 KB, against some 190 KB for the live histogram
/// with volley's bounds), so a long run's series costs kilobytes per row,
/// not hundreds; it is decoded when a merge needs its counts.
#[derive(Clone, Debug, PartialEq)]
pub struct IntervalHistogram(Vec<u8>);

impl IntervalHistogram {
    pub fn new(hist: &Histogram<u64>) -> IntervalHistogram {
        let mut bytes = Vec::new();
        // Encoding into a Vec fails only for invalid bounds, which volley's
        // histograms never have; an empty encoding then decodes as an error.
        let _ = V2DeflateSerializer::new().serialize(hist, &mut bytes);
        IntervalHistogram(bytes)
    }

    /// The histogram itself.
    pub fn histogram(&self) -> Result<Histogram<u64>, DecodeError> {
        Deserializer::new()
            .deserialize(&mut self.0.as_slice())
            .map_err(DecodeError::Hdr)
    }
}

impl serde::Serialize for IntervalHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

impl<'de> serde::Deserialize<'de> for IntervalHistogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| serde::de::Error::custom(format!("histogram is not base64: {e}")))?;
        let compact = IntervalHistogram(bytes);
        // A damaged histogram is refused when the report is read, not later.
        compact.histogram().map_err(serde::de::Error::custom)?;
        Ok(compact)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_histogram_is_compact_and_decodes_to_the_same_counts() {
        let mut h = crate::recorder::new_latency_histogram();
        for v in 1..=10_000u64 {
            h.record(v * 37).unwrap();
        }
        let compact = IntervalHistogram::new(&h);
        assert!(compact.0.len() < 20_000, "{} bytes", compact.0.len());
        assert_eq!(compact.histogram().unwrap(), h);
        let json = serde_json::to_string(&compact).unwrap();
        assert_eq!(
            json.trim_matches('"'),
            encode(&h),
            "the same text as the run's histogram"
        );
        let back: IntervalHistogram = serde_json::from_str(&json).unwrap();
        assert_eq!(back, compact);
        assert!(serde_json::from_str::<IntervalHistogram>("\"bm90IGEgaGlzdG9ncmFt\"").is_err());
    }

    #[test]
    fn round_trip() {
        let mut h = crate::recorder::new_latency_histogram();
        for v in [1u64, 50, 1000, 123_456, 30_000_000] {
            h.record(v).unwrap();
        }
        let text = encode(&h);
        assert!(text.starts_with("HISTF"), "V2 deflate cookie in base64: {text}");
        let back = decode(&text).unwrap();
        assert_eq!(back.len(), 5);
        assert_eq!(back.max(), h.max());
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
    }

    #[test]
    fn value_round_trips_through_json() {
        let mut h = crate::recorder::new_latency_histogram();
        h.record_n(700, 3).unwrap();
        let json = serde_json::to_string(&EncodedHistogram(h.clone())).unwrap();
        let back: EncodedHistogram = serde_json::from_str(&json).unwrap();
        assert_eq!(back.0, h);
        let err = serde_json::from_str::<EncodedHistogram>("\"bm90IGEgaGlzdG9ncmFt\"").unwrap_err();
        assert!(err.to_string().contains("not HdrHistogram V2"), "{err}");
    }
}
