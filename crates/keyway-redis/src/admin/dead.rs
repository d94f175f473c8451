//! Dead letters: list, show, replay, purge.

use redis::{Script, Value};

use super::report::{as_string, field};
use super::{Admin, AdminError};

/// KEYS: dead letters, shard stream. ARGV: dead-letter id. Appends the dead letter's key and
/// payload to the shard's stream and deletes it from the dead letters, in one step: the new
/// entry id, or nil if there is no such dead letter.
const REPLAY: &str = r"
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #e == 0 then return false end
local f = e[1][2]
local k, p
for i = 1, #f, 2 do
  if f[i] == 'k' then k = f[i + 1] elseif f[i] == 'p' then p = f[i + 1] end
end
if not k or not p then return redis.error_reply('KEYWAY_MALFORMED dead letter without k or p') end
local id = redis.call('XADD', KEYS[2], '*', 'k', k, 'p', p)
redis.call('XDEL', KEYS[1], ARGV[1])
return id
";

/// An entry in a shard's dead letters: it failed `attempts` times and was moved there (and
/// acknowledged) by the member holding the shard at `epoch`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The shard.
    pub shard: u32,
    /// Its id in the dead-letter stream (what `show`, `replay` and `purge` take).
    pub id: String,
    /// The id the entry had in the shard's stream.
    pub original_id: String,
    /// The entry's key.
    pub key: Vec<u8>,
    /// The entry's payload.
    pub payload: Vec<u8>,
    /// Attempts made.
    pub attempts: u64,
    /// The last failure's message.
    pub reason: String,
    /// The epoch of the lease under which it was dead-lettered.
    pub epoch: u64,
}

impl DeadLetter {
    fn parse(shard: u32, v: &Value) -> Option<DeadLetter> {
        let Value::Array(parts) = v else { return None };
        let id = as_string(parts.first()?)?;
        let fields = parts.get(1)?;
        let text = |name| field(fields, name).and_then(as_string).unwrap_or_default();
        let bytes = |name| match field(fields, name) {
            Some(Value::BulkString(b)) => b.clone(),
            _ => Vec::new(),
        };
        Some(DeadLetter {
            shard,
            original_id: text("id"),
            key: bytes("k"),
            payload: bytes("p"),
            attempts: text("attempts").parse().unwrap_or(0),
            reason: text("reason"),
            epoch: text("epoch").parse().unwrap_or(0),
            id,
        })
    }
}

/// A dead letter put back on its shard by [`Admin::replay`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Replayed {
    /// The shard.
    pub shard: u32,
    /// Its id in the dead letters (deleted there).
    pub dead_letter_id: String,
    /// Its new id in the shard's stream (`None` with `dry_run`).
    pub new_id: Option<String>,
}

impl Admin {
    /// The dead letters of `shard` (every shard if `None`), oldest first, at most `limit` per
    /// shard.
    pub fn dead_letters(
        &mut self,
        shard: Option<u32>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, AdminError> {
        let shards = match shard {
            Some(s) => vec![self.shard_of(s)?],
            None => (0..self.topic.shards()).collect(),
        };
        let mut out = Vec::new();
        for s in shards {
            let rows: Value = redis::cmd("XRANGE")
                .arg(self.topic.dead_letter_key(s))
                .arg("-")
                .arg("+")
                .arg("COUNT")
                .arg(limit)
                .query(&mut self.conn)?;
            if let Value::Array(rows) = rows {
                out.extend(rows.iter().filter_map(|r| DeadLetter::parse(s, r)));
            }
        }
        Ok(out)
    }

    /// Dead letter `id` of `shard`.
    pub fn dead_letter(&mut self, shard: u32, id: &str) -> Result<DeadLetter, AdminError> {
        let shard = self.shard_of(shard)?;
        let rows: Value = redis::cmd("XRANGE")
            .arg(self.topic.dead_letter_key(shard))
            .arg(id)
            .arg(id)
            .query(&mut self.conn)?;
        match &rows {
            Value::Array(rows) => rows.first().and_then(|r| DeadLetter::parse(shard, r)),
            _ => None,
        }
        .ok_or_else(|| AdminError::NoSuchDeadLetter {
            shard,
            id: id.to_owned(),
        })
    }

    /// Puts dead letters `ids` of `shard` (all of them, oldest first, if `ids` is empty) back
    /// at the end of the shard's stream, each moved in one script (see the module docs for
    /// the order this gives). `dry_run`: only says which.
    pub fn replay(
        &mut self,
        shard: u32,
        ids: &[String],
        dry_run: bool,
    ) -> Result<Vec<Replayed>, AdminError> {
        let shard = self.shard_of(shard)?;
        let ids = self.chosen(shard, ids)?;
        let script = Script::new(REPLAY);
        let mut out = Vec::new();
        for id in ids {
            let new_id = if dry_run {
                None
            } else {
                let new: Option<String> = script
                    .key(self.topic.dead_letter_key(shard))
                    .key(self.topic.shard_key(shard))
                    .arg(&id)
                    .invoke(&mut self.conn)
                    .map_err(|e| match e.code() {
                        Some("KEYWAY_MALFORMED") => AdminError::Malformed {
                            shard,
                            id: id.clone(),
                            field: "k or p",
                        },
                        _ => AdminError::Redis(e),
                    })?;
                match new {
                    Some(new) => Some(new),
                    None => {
                        return Err(AdminError::NoSuchDeadLetter { shard, id });
                    }
                }
            };
            out.push(Replayed {
                shard,
                dead_letter_id: id,
                new_id,
            });
        }
        Ok(out)
    }

    /// Deletes dead letters `ids` of `shard` (all of them if `ids` is empty): the ids deleted
    /// (`dry_run`: that would be).
    pub fn purge(
        &mut self,
        shard: u32,
        ids: &[String],
        dry_run: bool,
    ) -> Result<Vec<String>, AdminError> {
        let shard = self.shard_of(shard)?;
        let ids = self.chosen(shard, ids)?;
        if !dry_run && !ids.is_empty() {
            redis::cmd("XDEL")
                .arg(self.topic.dead_letter_key(shard))
                .arg(&ids)
                .query::<u64>(&mut self.conn)?;
        }
        Ok(ids)
    }

    /// `ids`, each checked to exist, or every dead letter of `shard` if empty.
    fn chosen(&mut self, shard: u32, ids: &[String]) -> Result<Vec<String>, AdminError> {
        if ids.is_empty() {
            return Ok(self
                .dead_letters(Some(shard), usize::MAX >> 1)?
                .into_iter()
                .map(|d| d.id)
                .collect());
        }
        for id in ids {
            self.dead_letter(shard, id)?;
        }
        Ok(ids.to_vec())
    }
}
