//! The `format` file of a tracepoint (`/sys/kernel/tracing/events/SYS/NAME/format`):
//! its id and the offset, size and signedness of every field of its raw
//! record. Offsets are read here at startup and never hard-coded: they change
//! between kernels (`tcp_probe` grew `sock_cookie`, `tcp_send_reset` a reason).
//!
//! A field line reads
//! `\tfield:__u8 saddr[4];\toffset:34;\tsize:4;\tsigned:0;`; the name is the
//! last word of the declaration, without its `[N]`.

/// One field of a raw tracepoint record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The C declaration, as the kernel wrote it (`const void * skaddr`).
    pub decl: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    /// `__data_loc`: the bytes hold a (length << 16 | offset) locator, not the value.
    pub dynamic: bool,
}

/// A parsed `format` file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Format {
    pub name: String,
    pub id: Option<u32>,
    pub fields: Vec<Field>,
}

impl Format {
    /// Parses the text of a `format` file. Lines it does not understand are
    /// skipped (the `print fmt:` line, blank lines); a field line without an
    /// offset or a size is skipped too, so that a field that cannot be placed
    /// reads as missing rather than at a wrong offset.
    pub fn parse(text: &str) -> Format {
        let mut f = Format::default();
        for line in text.lines() {
            let line = line.trim();
            if let Some(name) = line.strip_prefix("name:") {
                f.name = name.trim().to_string();
            } else if let Some(id) = line.strip_prefix("ID:") {
                f.id = id.trim().parse().ok();
            } else if line.starts_with("field:") {
                if let Some(field) = parse_field(line) {
                    f.fields.push(field);
                }
            }
        }
        f
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The first of `names` this format has (fields were renamed across
    /// kernels: `sk` / `skaddr`).
    pub fn any_field(&self, names: &[&str]) -> Option<&Field> {
        names.iter().find_map(|n| self.field(n))
    }
}

fn parse_field(line: &str) -> Option<Field> {
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for part in line.split(';') {
        let part = part.trim();
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("size:") {
            size = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let decl = decl?;
    let last = decl.split_whitespace().last()?;
    // `saddr[4]` -> `saddr`; `*name` (no space before the star) -> `name`.
    let name = last
        .split('[')
        .next()
        .unwrap_or(last)
        .trim_start_matches('*');
    if name.is_empty() {
        return None;
    }
    Some(Field {
        name: name.to_string(),
        decl: decl.to_string(),
        offset: offset?,
        size: size?,
        signed,
        dynamic: decl.starts_with("__data_loc"),
    })
}

impl Field {
    /// The field's bytes (arrays: `__u8 saddr_v6[16]`).
    #[inline]
    pub fn bytes<'a>(&self, raw: &'a [u8]) -> Option<&'a [u8]> {
        raw.get(self.offset..self.offset.checked_add(self.size)?)
    }
}
