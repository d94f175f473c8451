//! Reading the replies of `XPENDING` and the fenced read and claim scripts
//! (RESP2 arrays).

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

/// What a fenced script (read, claim, give-back) answered.
#[derive(Debug, Default)]
pub(crate) struct Fenced {
    /// Redis refused: this member does not hold the lease at that epoch.
    pub(crate) refused: bool,
    /// Entries read or claimed.
    pub(crate) entries: Vec<RawEntry>,
    /// Pending ids found trimmed from the stream (they left the pending list).
    pub(crate) trimmed: Vec<EntryId>,
    /// After an empty read: the stream's last entry, to wait for newer ones from.
    pub(crate) last: Option<EntryId>,
}

fn ids(v: Option<&Value>) -> Result<Vec<EntryId>, StreamError> {
    let Some(list) = v.and_then(array) else {
        return Ok(Vec::new());
    };
    list.iter().map(entry_id).collect()
}

/// The fenced read script's reply: `{1, entries}`, `{2, last id}` or `{-1}`.
pub(crate) fn fenced_read(v: &Value) -> Result<Fenced, StreamError> {
    let parts = array(v).ok_or_else(|| bad("read script reply"))?;
    match parts.first() {
        Some(Value::Int(1)) => Ok(Fenced {
            entries: entries(parts.get(1).ok_or_else(|| bad("read entries"))?)?,
            ..Fenced::default()
        }),
        Some(Value::Int(2)) => Ok(Fenced {
            last: Some(entry_id(parts.get(1).ok_or_else(|| bad("read last id"))?)?),
            ..Fenced::default()
        }),
        Some(Value::Int(-1)) => Ok(Fenced {
            refused: true,
            ..Fenced::default()
        }),
        _ => Err(bad("read script status")),
    }
}

/// The claim and give-back scripts' reply: `{1, entries, trimmed ids}`, `{1, trimmed ids}`
/// (give-back) or `{-1}`.
pub(crate) fn fenced_claim(v: &Value, with_entries: bool) -> Result<Fenced, StreamError> {
    let parts = array(v).ok_or_else(|| bad("claim script reply"))?;
    match parts.first() {
        Some(Value::Int(1)) if with_entries => Ok(Fenced {
            entries: match parts.get(1) {
                Some(list) => entries(list)?,
                None => Vec::new(),
            },
            trimmed: ids(parts.get(2))?,
            ..Fenced::default()
        }),
        Some(Value::Int(1)) => Ok(Fenced {
            trimmed: ids(parts.get(1))?,
            ..Fenced::default()
        }),
        Some(Value::Int(-1)) => Ok(Fenced {
            refused: true,
            ..Fenced::default()
        }),
        _ => Err(bad("claim script status")),
    }
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
        let read = Value::Array(vec![Value::Int(1), Value::Array(vec![e.clone()])]);
        let got = fenced_read(&read).unwrap().entries;
        assert_eq!(got[0].id, EntryId { ms: 1, seq: 2 });
        assert_eq!(
            (got[0].key.as_slice(), got[0].payload.as_slice()),
            (&b"a"[..], &b"x"[..])
        );
        let claim = Value::Array(vec![
            Value::Int(1),
            Value::Array(vec![e.clone()]),
            Value::Array(vec![s("1-1")]),
        ]);
        let c = fenced_claim(&claim, true).unwrap();
        assert!(!c.refused);
        assert_eq!(c.entries.len(), 1);
        assert_eq!(c.trimmed, vec![EntryId { ms: 1, seq: 1 }]);
        let idle = Value::Array(vec![Value::Int(2), s("5-0")]);
        assert_eq!(
            fenced_read(&idle).unwrap().last,
            Some(EntryId { ms: 5, seq: 0 })
        );
        let fenced = Value::Array(vec![Value::Int(-1)]);
        assert!(fenced_read(&fenced).unwrap().refused);
        assert!(fenced_claim(&fenced, false).unwrap().refused);
    }
}
