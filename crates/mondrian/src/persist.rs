//! Saving and loading models: a versioned, checksummed header around a serde payload.
//!
//! Layout: `b"MONDRIAN"`, format version (u32 LE), model kind (u8 length + UTF-8), the
//! payload's [`Encoding`] (u8), payload length (u64 LE), CRC-32 of the payload (u32 LE),
//! CRC-32 of the header bytes before it (u32 LE), then the payload: bincode, as is or
//! deflate-compressed (compact models). A damaged header (a flipped length byte, say) is
//! reported as corruption before anything else is read; the payload is decoded as it is
//! read, without a copy of the whole file in memory, and a payload that does not match
//! its checksum or length is refused with a [`MondrianError`].

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use bincode::Options;
use serde::{de::DeserializeOwned, Serialize};

use crate::error::{MondrianError, Result};

const MAGIC: &[u8; 8] = b"MONDRIAN";
/// Version of the on-disk format written by this build (11: the header carries its own
/// checksum and the payload's encoding (compact models are compressed), the thread count
/// is not saved, the point store keeps sample weights, trees record whether they are
/// compact; 10: trees keep free lists of the
/// nodes, boxes and point sets deletion released; 9: on wide data a node over a few
/// points names them instead of storing its box; 8: a leaf keeps up to two point
/// ids in its record, only longer point lists are kept apart; 7: a node's box slot and
/// pause flag sit in its record; 6: a leaf of a single point stores no box, trees keep a
/// box slot per node; 5: the regressor keeps the PITs that recalibrate its intervals; 4:
/// the point store keeps the cross-validated choice of the relevance power; 3: scalers
/// carry feature weights; 2: the classifier keeps its points in the shared point store;
/// files of earlier versions are refused with a clear error).
pub const FORMAT_VERSION: u32 = 11;

/// How the payload is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// The bincode bytes as they are: fastest to write and read.
    Plain,
    /// The bincode bytes deflate-compressed (RFC 1951): a compact model's boxes are
    /// training values, few per feature, and its records repeat, so they shrink several
    /// times; decoding still streams.
    Deflate,
}

impl Encoding {
    fn byte(self) -> u8 {
        match self {
            Encoding::Plain => 0,
            Encoding::Deflate => 1,
        }
    }
    fn of(byte: u8) -> Option<Encoding> {
        match byte {
            0 => Some(Encoding::Plain),
            1 => Some(Encoding::Deflate),
            _ => None,
        }
    }
}

/// The payload's encoding: bincode with fixed-width integers (as `bincode::serialize`).
fn codec() -> impl Options {
    bincode::DefaultOptions::new().with_fixint_encoding()
}

/// A writer that counts the bytes and checksums them on their way through.
struct Checked<W> {
    inner: W,
    hasher: crc32fast::Hasher,
    len: u64,
}

impl<W: Write> Write for Checked<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
}

/// Writes `value` with the header for model kind `kind`, its payload as is
/// ([`Encoding::Plain`]; see [`save_encoded`]).
pub fn save<T: Serialize, W: Write>(value: &T, kind: &str, writer: W) -> Result<()> {
    save_encoded(value, kind, Encoding::Plain, writer)
}

/// Writes `value` with the header for model kind `kind` and its payload in `encoding`.
/// A plain payload's length and checksum are found by a first encoding pass that writes
/// nothing (bincode's size and a checksum of the bytes as they stream by), so no copy of
/// the model's bytes is ever held; a compressed payload is built in memory first (it is
/// the small one).
pub fn save_encoded<T: Serialize, W: Write>(
    value: &T,
    kind: &str,
    encoding: Encoding,
    mut writer: W,
) -> Result<()> {
    let encode_error = |e: bincode::Error| match *e {
        bincode::ErrorKind::Io(io) => MondrianError::Io(io),
        other => MondrianError::CorruptModel(format!("cannot encode model: {other}")),
    };
    let kind_len = u8::try_from(kind.len())
        .map_err(|_| MondrianError::CorruptModel(format!("model kind `{kind}` is too long")))?;
    let compressed = match encoding {
        Encoding::Plain => None,
        Encoding::Deflate => {
            let encoder =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            // bincode writes field by field: the compressor takes them in large blocks.
            let mut buffered = BufWriter::with_capacity(1 << 16, encoder);
            codec()
                .serialize_into(&mut buffered, value)
                .map_err(encode_error)?;
            let encoder = buffered.into_inner().map_err(|e| e.into_error())?;
            Some(encoder.finish()?)
        }
    };
    let (payload_len, payload_crc) = match &compressed {
        Some(bytes) => (bytes.len() as u64, crc32fast::hash(bytes)),
        None => {
            let mut sink = Checked {
                inner: std::io::sink(),
                hasher: crc32fast::Hasher::new(),
                len: 0,
            };
            codec()
                .serialize_into(&mut sink, value)
                .map_err(encode_error)?;
            (sink.len, sink.hasher.finalize())
        }
    };
    let mut header = Vec::with_capacity(32 + kind.len());
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    header.push(kind_len);
    header.extend_from_slice(kind.as_bytes());
    header.push(encoding.byte());
    header.extend_from_slice(&payload_len.to_le_bytes());
    header.extend_from_slice(&payload_crc.to_le_bytes());
    let header_crc = crc32fast::hash(&header);
    header.extend_from_slice(&header_crc.to_le_bytes());
    writer.write_all(&header)?;
    if let Some(bytes) = compressed {
        writer.write_all(&bytes)?;
        writer.flush()?;
        return Ok(());
    }
    let mut out = Checked {
        inner: &mut writer,
        hasher: crc32fast::Hasher::new(),
        len: 0,
    };
    codec()
        .serialize_into(&mut out, value)
        .map_err(encode_error)?;
    // The second pass must write what the first measured (serialization is deterministic).
    if out.len != payload_len || out.hasher.finalize() != payload_crc {
        return Err(MondrianError::CorruptModel(
            "the model changed while it was being written".into(),
        ));
    }
    writer.flush()?;
    Ok(())
}

/// Writes `value` with the header for model kind `kind` to the file `path`, crash-safe: a
/// crash or a kill at any moment leaves either the file as it was or the whole new model,
/// never a part of one. See [`replace_file`].
pub fn save_file<T: Serialize>(value: &T, kind: &str, path: &Path) -> Result<()> {
    save_file_encoded(value, kind, Encoding::Plain, path)
}

/// [`save_file`] with the payload in `encoding`.
pub fn save_file_encoded<T: Serialize>(
    value: &T,
    kind: &str,
    encoding: Encoding,
    path: &Path,
) -> Result<()> {
    replace_file(path, |writer| save_encoded(value, kind, encoding, writer))
}

/// Replaces the file `path` by what `write` writes, or leaves it as it was. The bytes go to
/// a new temporary file in the same directory (named `.NAME.tmp-PID-N`), which is flushed
/// to the disk (`fsync`) and then renamed over `path` (atomic on POSIX file systems); the
/// directory is then synced so that the rename itself survives a power cut. On any error
/// the temporary file is removed and `path` is untouched. The new file has the default
/// permissions of a new file, and a symbolic link at `path` is replaced, not followed.
pub fn replace_file(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<()>,
) -> Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| {
        MondrianError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} does not name a file", path.display()),
        ))
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(
        ".tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let temp = dir.join(temp_name);
    let result = (|| {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        let mut writer = BufWriter::new(file);
        write(&mut writer)?;
        let file = writer.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, path)?;
        sync_dir(dir);
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Syncs a directory's entries (the rename of [`replace_file`]). Best effort: some systems
/// cannot open a directory for syncing, and the file's own data is already on disk.
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

fn read_exact<R: Read>(reader: &mut R, buf: &mut [u8], what: &str) -> Result<()> {
    reader.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            MondrianError::CorruptModel(format!("file ends inside the {what}: truncated?"))
        }
        _ => MondrianError::Io(e),
    })
}

/// The model kind named in the header of a saved file, if the header is well formed (for
/// tools that accept several kinds).
pub fn kind_of(bytes: &[u8]) -> Option<String> {
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    let (&len, rest) = rest.get(4..)?.split_first()?;
    rest.get(..len as usize)
        .map(|k| String::from_utf8_lossy(k).into_owned())
}

/// Reads a value of model kind `kind` written by [`save`], decoding the payload as it is
/// read (no copy of the file is held; bincode's length limit keeps a damaged length
/// prefix from allocating more than the payload could hold).
pub fn load<T: DeserializeOwned, R: Read>(kind: &str, mut reader: R) -> Result<T> {
    let mut header = vec![0u8; 8 + 4 + 1];
    read_exact(&mut reader, &mut header, "header")?;
    if &header[..8] != MAGIC {
        return Err(MondrianError::CorruptModel(
            "not a mondrian model file (bad magic bytes)".into(),
        ));
    }
    let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
    let kind_len = header[12] as usize;
    let fixed = header.len();
    header.resize(fixed + kind_len + 1 + 8 + 4 + 4, 0);
    read_exact(&mut reader, &mut header[fixed..], "header")?;
    let (body, crc_bytes) = header.split_at(header.len() - 4);
    // A file of another version may lay its header out differently: name the version
    // rather than a checksum it never had.
    if version != FORMAT_VERSION {
        return Err(MondrianError::IncompatibleVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if crc32fast::hash(body) != u32::from_le_bytes(crc_bytes.try_into().expect("4 bytes")) {
        return Err(MondrianError::CorruptModel(
            "header checksum mismatch: the file is corrupt".into(),
        ));
    }
    let found_kind = &body[fixed..fixed + kind_len];
    if found_kind != kind.as_bytes() {
        return Err(MondrianError::CorruptModel(format!(
            "file holds a `{}` model, expected `{kind}`",
            String::from_utf8_lossy(found_kind)
        )));
    }
    let Some(encoding) = Encoding::of(body[fixed + kind_len]) else {
        return Err(MondrianError::CorruptModel(format!(
            "unknown payload encoding {}",
            body[fixed + kind_len]
        )));
    };
    let at = fixed + kind_len + 1;
    let payload_len = u64::from_le_bytes(body[at..at + 8].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(body[at + 8..at + 12].try_into().expect("4 bytes"));
    let mut payload = Checked {
        inner: reader.take(payload_len),
        hasher: crc32fast::Hasher::new(),
        len: 0,
    };
    let decoded: std::result::Result<T, _> = match encoding {
        Encoding::Plain => codec()
            .with_limit(payload_len)
            .deserialize_from(&mut payload),
        Encoding::Deflate => {
            // Deflate expands at most about 1032-fold: a bound for a damaged stream.
            let mut inflated = std::io::BufReader::with_capacity(
                1 << 16,
                flate2::read::DeflateDecoder::new(&mut payload),
            );
            let value = codec()
                .with_limit(payload_len.saturating_mul(1032))
                .deserialize_from(&mut inflated);
            // The rest of the stream (its end marker) is read, so that the whole payload
            // is checksummed; a damaged stream shows in the checksum below.
            let _ = std::io::copy(&mut inflated, &mut std::io::sink());
            value
        }
    };
    // Whatever the decoder left (a damaged payload may stop early) is read and checksummed,
    // so that a damaged file is reported as such rather than as a decoding failure.
    let rest = std::io::copy(&mut payload, &mut std::io::sink())?;
    if payload.len < payload_len {
        return Err(MondrianError::CorruptModel(format!(
            "file is truncated: {} of {payload_len} payload bytes",
            payload.len
        )));
    }
    if payload.hasher.finalize() != crc {
        return Err(MondrianError::CorruptModel(
            "checksum mismatch: the file is corrupt".into(),
        ));
    }
    let value = decoded.map_err(|e| match *e {
        bincode::ErrorKind::Io(io) if io.kind() != std::io::ErrorKind::UnexpectedEof => {
            MondrianError::Io(io)
        }
        other => MondrianError::CorruptModel(format!("cannot decode model: {other}")),
    })?;
    if rest > 0 {
        return Err(MondrianError::CorruptModel(format!(
            "the model ends {rest} bytes before its payload does"
        )));
    }
    Ok(value)
}

/// [`load`] from a reader that must hold one saved model and nothing after it (a whole
/// file or byte buffer): anything left over means the file is not what it claims.
pub fn load_whole<T: DeserializeOwned, R: Read>(kind: &str, mut reader: R) -> Result<T> {
    let value = load(kind, &mut reader)?;
    let mut extra = [0u8; 1];
    match reader.read(&mut extra)? {
        0 => Ok(value),
        _ => Err(MondrianError::CorruptModel(
            "unexpected data after the end of the model".into(),
        )),
    }
}

/// A model type that is saved and loaded under its own kind name: `save_to` / `load_from`
/// for any writer and reader, `save` / `load` for files, `to_bytes` / `from_bytes`. The
/// type checks itself while it is decoded (`serde(try_from)`), so every road in, these and
/// a model nested in another file, is checked.
///
/// ```
/// use mondrian::{ClassifierParams, MondrianForestClassifier, Persistent};
///
/// let mut model = MondrianForestClassifier::new(ClassifierParams {
///     n_trees: 3,
///     ..Default::default()
/// })?;
/// model.fit(&[0.0f32, 0.0, 1.0, 1.0], 2, &[0, 1])?;
/// let bytes = model.to_bytes()?;
/// let again = MondrianForestClassifier::from_bytes(&bytes)?;
/// assert_eq!(again.to_bytes()?, bytes);
/// # Ok::<(), mondrian::MondrianError>(())
/// ```
pub trait Persistent: Serialize + DeserializeOwned {
    /// The kind name written in the header; a file of another kind is refused.
    const KIND: &'static str;

    /// How the payload is stored: compact models compress it.
    fn encoding(&self) -> Encoding {
        Encoding::Plain
    }

    /// Writes the model (versioned, checksummed; see [`crate::persist`]).
    fn save_to<W: Write>(&self, writer: W) -> Result<()> {
        save_encoded(self, Self::KIND, self.encoding(), writer)
    }

    /// Reads a model written by [`save_to`](Self::save_to); a corrupt, truncated, foreign
    /// or newer file is an error.
    fn load_from<R: Read>(reader: R) -> Result<Self> {
        load(Self::KIND, reader)
    }

    /// Saves to a file, crash-safe: a crash or a kill during the save leaves the file as
    /// it was or the whole new model, never a part ([`save_file`]).
    fn save(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        save_file_encoded(self, Self::KIND, self.encoding(), path.as_ref())
    }

    /// Loads from a file.
    fn load(path: impl AsRef<std::path::Path>) -> Result<Self> {
        let file = std::fs::File::open(path)?;
        load_whole(Self::KIND, std::io::BufReader::new(file))
    }

    /// The model as bytes (the same format as [`save`](Self::save)).
    fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.save_to(&mut buf)?;
        Ok(buf)
    }

    /// A model from bytes written by [`to_bytes`](Self::to_bytes).
    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        load_whole(Self::KIND, bytes)
    }
}
