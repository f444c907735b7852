//! A request's headers packed into one buffer ([`PackedHeaders`]), as a retry layer keeps them
//! for a re-send.
//!
//! Why not a clone of the `HeaderMap`: the clone allocates twice (its index and its entries),
//! and every name or value whose bytes are not yet shared (each one built from a `&str` or a
//! `String`, as most are) allocates a shared count of its own on its first clone — ten
//! allocations for an MCP request's usual headers, on every call, for a copy that is read
//! only when a call is re-sent. Packed, the copy is one allocation and one pass over the
//! bytes; a re-send pays for the map instead. The values it builds are copies: a value kept
//! after a re-send never holds the buffer, and the other values (an `Authorization`) with it.

use http::{HeaderMap, HeaderName, HeaderValue};

/// The bytes of a length in the buffer.
const LENGTH: usize = std::mem::size_of::<usize>();

/// Headers in one buffer, in the map's order: for each entry, the name's length and the
/// value's (native `usize`s), whether the value is sensitive (one byte), the name, the value.
pub(crate) struct PackedHeaders {
    bytes: Box<[u8]>,
    /// How many entries (a name with two values is two).
    count: usize,
}

/// One entry of the buffer.
struct Entry<'a> {
    name: &'a [u8],
    value: &'a [u8],
    sensitive: bool,
}

impl PackedHeaders {
    /// A copy of `headers`.
    pub(crate) fn of(headers: &HeaderMap) -> Self {
        let size = headers
            .iter()
            .map(|(name, value)| 2 * LENGTH + 1 + name.as_str().len() + value.len())
            .sum();
        // Exactly the size: the boxed slice takes the vector without another allocation.
        let mut bytes = Vec::with_capacity(size);
        for (name, value) in headers {
            let name = name.as_str().as_bytes();
            bytes.extend_from_slice(&name.len().to_ne_bytes());
            bytes.extend_from_slice(&value.len().to_ne_bytes());
            bytes.push(u8::from(value.is_sensitive()));
            bytes.extend_from_slice(name);
            bytes.extend_from_slice(value.as_bytes());
        }
        Self {
            bytes: bytes.into_boxed_slice(),
            count: headers.len(),
        }
    }

    /// Whether `headers` holds exactly these entries, in this order, sensitive alike.
    pub(crate) fn is_of(&self, headers: &HeaderMap) -> bool {
        self.count == headers.len()
            && self.entries().zip(headers).all(|(entry, (name, value))| {
                entry.name == name.as_str().as_bytes()
                    && entry.value == value.as_bytes()
                    && entry.sensitive == value.is_sensitive()
            })
    }

    /// The headers as a map again. `None` only for a value that `http` would not have built:
    /// one made with its `unsafe` unchecked constructor against its rules.
    pub(crate) fn to_map(&self) -> Option<HeaderMap> {
        // Sized ahead when `http` allows it: its index for `count` entries may pass its limit
        // where a map grown entry by entry, as the one packed was, does not.
        let mut map = HeaderMap::try_with_capacity(self.count).unwrap_or_default();
        for entry in self.entries() {
            let name = HeaderName::from_bytes(entry.name).ok()?;
            let mut value = HeaderValue::from_bytes(entry.value).ok()?;
            value.set_sensitive(entry.sensitive);
            map.try_append(name, value).ok()?;
        }
        Some(map)
    }

    /// The first value of the header `name` (lower case).
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn get(&self, name: &str) -> Option<HeaderValue> {
        let entry = self.entries().find(|e| e.name == name.as_bytes())?;
        HeaderValue::from_bytes(entry.value).ok()
    }

    fn entries(&self) -> impl Iterator<Item = Entry<'_>> {
        let bytes = &self.bytes[..];
        let mut at = 0;
        std::iter::from_fn(move || {
            let length = |from: usize| {
                let mut word = [0; LENGTH];
                word.copy_from_slice(bytes.get(from..from + LENGTH)?);
                Some(usize::from_ne_bytes(word))
            };
            let (name, value) = (length(at)?, length(at + LENGTH)?);
            let sensitive = *bytes.get(at + 2 * LENGTH)? == 1;
            let start = at + 2 * LENGTH + 1;
            at = start + name + value;
            Some(Entry {
                name: bytes.get(start..start + name)?,
                value: bytes.get(start + name..at)?,
                sensitive,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.append("content-type", HeaderValue::from_static("application/json"));
        headers.append("mcp-session-id", HeaderValue::from_str("s-1").unwrap());
        headers.append("x-many", HeaderValue::from_static("one"));
        headers.append("accept", HeaderValue::from_static("*/*"));
        headers.append("x-many", HeaderValue::from_static(""));
        let mut secret = HeaderValue::from_str("Bearer t").unwrap();
        secret.set_sensitive(true);
        headers.append("authorization", secret);
        headers.append("x-obs", HeaderValue::from_bytes(b"caf\xc3\xa9\t!").unwrap());
        headers
    }

    fn listed(headers: &HeaderMap) -> Vec<(String, Vec<u8>, bool)> {
        headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec(), v.is_sensitive()))
            .collect()
    }

    #[test]
    fn a_map_comes_back_entry_for_entry_in_its_order_sensitive_alike() {
        let headers = headers();
        let packed = PackedHeaders::of(&headers);
        let back = packed.to_map().unwrap();
        assert_eq!(listed(&back), listed(&headers));
        assert_eq!(listed(&back).len(), 7);
        assert!(packed.is_of(&headers) && packed.is_of(&back));
        let empty = PackedHeaders::of(&HeaderMap::new());
        assert!(empty.to_map().unwrap().is_empty() && empty.is_of(&HeaderMap::new()));
        assert!(!empty.is_of(&headers));
    }

    #[test]
    fn a_map_of_as_many_values_as_http_takes_comes_back_whole() {
        // More than `HeaderMap::with_capacity` accepts at once, fewer than a map grown value by
        // value holds.
        let mut headers = HeaderMap::new();
        for i in 0..25_000 {
            headers.append("x-a", HeaderValue::from(i));
        }
        let back = PackedHeaders::of(&headers).to_map().unwrap();
        assert_eq!(listed(&back), listed(&headers));
    }

    #[test]
    fn any_change_is_seen_a_value_a_name_an_order_a_flag_an_entry() {
        let packed = PackedHeaders::of(&headers());
        let changed: [fn(&mut HeaderMap); 5] = [
            |h| _ = h.insert("mcp-session-id", HeaderValue::from_static("s-2")),
            |h| {
                let v = h.remove("accept").unwrap();
                h.append("accepts", v);
            },
            |h| h.get_mut("authorization").unwrap().set_sensitive(false),
            |h| _ = h.append("x-many", HeaderValue::from_static("three")),
            |h| _ = h.remove("x-obs"),
        ];
        for change in changed {
            let mut headers = headers();
            change(&mut headers);
            assert!(!packed.is_of(&headers), "{:?}", listed(&headers));
        }
        // The same entries in another order are another head (it is then copied, not shared).
        let mut reordered = HeaderMap::new();
        let headers = headers();
        let entries: Vec<_> = headers.iter().collect();
        for (name, value) in entries.into_iter().rev() {
            reordered.append(name, value.clone());
        }
        assert!(!packed.is_of(&reordered));
    }
}
