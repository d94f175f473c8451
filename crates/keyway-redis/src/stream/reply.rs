//! Reading the replies of `XREADGROUP`, `XAUTOCLAIM` and `XPENDING` (RESP2 arrays).

use redis::Value;

use crate::stream::{EntryId, StreamError};

/// One stream entry as read: its id, key and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawEntry {
    pub(crate) id: EntryId,
    pub(crate) key: Vec<u8>,
    pub(crate) payload: Vec<u8>,
}

fn bad(what: &str) -> StreamError {
    StreamError::Protocol(what.to_owned())
}

fn bytes(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

fn array(v: &Value) -> Option<&[Value]> {
    match v {
        Value::Array(a) | Value::Set(a) => Some(a),
        _ => None,
    }
}

pub(crate) fn entry_id(v: &Value) -> Result<EntryId, StreamError> {
    let b = bytes(v).ok_or_else(|| bad("entry id is not a string"))?;
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("malformed entry id"))
}

/// `[id, [field, value, ...]]`; `None` for an entry without fields (deleted under Redis < 7).
fn entry(v: &Value) -> Result<Option<RawEntry>, StreamError> {
    let pair = array(v).ok_or_else(|| bad("entry is not an array"))?;
    let [id, fields] = pair else {
        return Err(bad("entry is not [id, fields]"));
    };
    let id = entry_id(id)?;
    let Some(fields) = array(fields) else {
        return Ok(None);
    };
    let (mut key, mut payload) = (None, None);
    for kv in fields.chunks(2) {
        if let [k, v] = kv {
            match bytes(k) {
                Some(b"k") => key = bytes(v).map(<[u8]>::to_vec),
                Some(b"p") => payload = bytes(v).map(<[u8]>::to_vec),
                _ => {}
            }
        }
    }
    Ok(Some(RawEntry {
        id,
        key: key.unwrap_or_default(),
        payload: payload.unwrap_or_default(),
    }))
}

fn entries(v: &Value) -> Result<Vec<RawEntry>, StreamError> {
    let list = array(v).ok_or_else(|| bad("entries are not an array"))?;
    let mut out = Vec::with_capacity(list.len());
    for e in list {
        out.extend(entry(e)?);
    }
    Ok(out)
}

/// `XREADGROUP … STREAMS one-key >`: nil on timeout, else `[[key, entries]]`.
pub(crate) fn read_group(v: &Value) -> Result<Vec<RawEntry>, StreamError> {
    match v {
        Value::Nil => Ok(Vec::new()),
        Value::Map(streams) => match streams.first() {
            Some((_, list)) => entries(list),
            None => Ok(Vec::new()),
        },
        _ => {
            let streams = array(v).ok_or_else(|| bad("XREADGROUP reply"))?;
            let Some(first) = streams.first() else {
                return Ok(Vec::new());
            };
            match array(first) {
                Some([_, list]) => entries(list),
                _ => Err(bad("XREADGROUP stream reply")),
            }
        }
    }
}

/// What one `XAUTOCLAIM` returned.
#[derive(Debug, Default)]
pub(crate) struct Claimed {
    /// Where the next call starts; `0-0` when the pending list was scanned to its end.
    pub(crate) next: EntryId,
    pub(crate) entries: Vec<RawEntry>,
    /// Ids pending in the group whose entries were trimmed from the stream (Redis removed them
    /// from the pending list).
    pub(crate) deleted: Vec<EntryId>,
}

/// `XAUTOCLAIM`: `[next, entries, deleted ids]` (the third only from Redis 7).
pub(crate) fn autoclaim(v: &Value) -> Result<Claimed, StreamError> {
    let parts = array(v).ok_or_else(|| bad("XAUTOCLAIM reply"))?;
    let next = entry_id(parts.first().ok_or_else(|| bad("XAUTOCLAIM cursor"))?)?;
    let entries = match parts.get(1) {
        Some(list) => entries(list)?,
        None => Vec::new(),
    };
    let mut deleted = Vec::new();
    if let Some(list) = parts.get(2).and_then(array) {
        for id in list {
            deleted.push(entry_id(id)?);
        }
    }
    Ok(Claimed {
        next,
        entries,
        deleted,
    })
}

/// `XPENDING key group start end count`: `(id, delivery count)` pairs.
pub(crate) fn pending_counts(v: &Value) -> Result<Vec<(EntryId, u64)>, StreamError> {
    let list = array(v).ok_or_else(|| bad("XPENDING reply"))?;
    let mut out = Vec::with_capacity(list.len());
    for row in list {
        match array(row) {
            Some([id, _, _, Value::Int(n)]) => out.push((entry_id(id)?, (*n).max(0) as u64)),
            _ => return Err(bad("XPENDING row")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Value {
        Value::BulkString(x.as_bytes().to_vec())
    }

    #[test]
    fn parses_read_and_claim_replies() {
        let e = Value::Array(vec![
            s("1-2"),
            Value::Array(vec![s("k"), s("a"), s("p"), s("x")]),
        ]);
        let read = Value::Array(vec![Value::Array(vec![
            s("stream"),
            Value::Array(vec![e.clone()]),
        ])]);
        let got = read_group(&read).unwrap();
        assert_eq!(got[0].id, EntryId { ms: 1, seq: 2 });
        assert_eq!(
            (got[0].key.as_slice(), got[0].payload.as_slice()),
            (&b"a"[..], &b"x"[..])
        );
        assert!(read_group(&Value::Nil).unwrap().is_empty());
        let claim = Value::Array(vec![
            s("0-0"),
            Value::Array(vec![e]),
            Value::Array(vec![s("1-1")]),
        ]);
        let c = autoclaim(&claim).unwrap();
        assert_eq!(c.next, EntryId::default());
        assert_eq!(c.entries.len(), 1);
        assert_eq!(c.deleted, vec![EntryId { ms: 1, seq: 1 }]);
    }
}
