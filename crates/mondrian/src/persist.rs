//! Saving and loading models: a versioned, checksummed header around a serde payload.
//!
//! Layout: `b"MONDRIAN"`, format version (u32 LE), model kind (u8 length + UTF-8), payload
//! length (u64 LE), CRC-32 of the payload (u32 LE), then the bincode payload. A truncated,
//! corrupt or foreign file is refused with a [`MondrianError`] before anything is decoded.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use bincode::Options;
use serde::{de::DeserializeOwned, Serialize};

use crate::error::{MondrianError, Result};

const MAGIC: &[u8; 8] = b"MONDRIAN";
/// Version of the on-disk format written by this build (11: the point store keeps sample
/// weights; 10: trees keep free lists of the
/// nodes, boxes and point sets deletion released; 9: on wide data a node over a few
/// points names them instead of storing its box; 8: a leaf keeps up to two point
/// ids in its record, only longer point lists are kept apart; 7: a node's box slot and
/// pause flag sit in its record; 6: a leaf of a single point stores no box, trees keep a
/// box slot per node; 5: the regressor keeps the PITs that recalibrate its intervals; 4:
/// the point store keeps the cross-validated choice of the relevance power; 3: scalers
/// carry feature weights; 2: the classifier keeps its points in the shared point store;
/// files of earlier versions are refused with a clear error).
pub const FORMAT_VERSION: u32 = 11;

/// Writes `value` with the header for model kind `kind`.
pub fn save<T: Serialize, W: Write>(value: &T, kind: &str, mut writer: W) -> Result<()> {
    let payload = bincode::serialize(value)
        .map_err(|e| MondrianError::CorruptModel(format!("cannot encode model: {e}")))?;
    writer.write_all(MAGIC)?;
    writer.write_all(&FORMAT_VERSION.to_le_bytes())?;
    writer.write_all(&[kind.len() as u8])?;
    writer.write_all(kind.as_bytes())?;
    writer.write_all(&(payload.len() as u64).to_le_bytes())?;
    writer.write_all(&crc32fast::hash(&payload).to_le_bytes())?;
    writer.write_all(&payload)?;
    writer.flush()?;
    Ok(())
}

/// Writes `value` with the header for model kind `kind` to the file `path`, crash-safe: a
/// crash or a kill at any moment leaves either the file as it was or the whole new model,
/// never a part of one. See [`replace_file`].
pub fn save_file<T: Serialize>(value: &T, kind: &str, path: &Path) -> Result<()> {
    replace_file(path, |writer| save(value, kind, writer))
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

/// Reads a value of model kind `kind` written by [`save`].
pub fn load<T: DeserializeOwned, R: Read>(kind: &str, mut reader: R) -> Result<T> {
    let mut magic = [0u8; 8];
    read_exact(&mut reader, &mut magic, "header")?;
    if &magic != MAGIC {
        return Err(MondrianError::CorruptModel(
            "not a mondrian model file (bad magic bytes)".into(),
        ));
    }
    let mut word = [0u8; 4];
    read_exact(&mut reader, &mut word, "header")?;
    let version = u32::from_le_bytes(word);
    if version != FORMAT_VERSION {
        return Err(MondrianError::IncompatibleVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let mut len = [0u8; 1];
    read_exact(&mut reader, &mut len, "header")?;
    let mut found_kind = vec![0u8; len[0] as usize];
    read_exact(&mut reader, &mut found_kind, "header")?;
    if found_kind != kind.as_bytes() {
        return Err(MondrianError::CorruptModel(format!(
            "file holds a `{}` model, expected `{kind}`",
            String::from_utf8_lossy(&found_kind)
        )));
    }
    let mut len8 = [0u8; 8];
    read_exact(&mut reader, &mut len8, "header")?;
    let payload_len = u64::from_le_bytes(len8);
    read_exact(&mut reader, &mut word, "header")?;
    let crc = u32::from_le_bytes(word);
    let mut payload = Vec::new();
    reader.take(payload_len).read_to_end(&mut payload)?;
    if (payload.len() as u64) < payload_len {
        return Err(MondrianError::CorruptModel(format!(
            "file is truncated: {} of {payload_len} payload bytes",
            payload.len()
        )));
    }
    if crc32fast::hash(&payload) != crc {
        return Err(MondrianError::CorruptModel(
            "checksum mismatch: the file is corrupt".into(),
        ));
    }
    // The encoding of `bincode::serialize`, but a payload must be used up exactly.
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .reject_trailing_bytes()
        .deserialize(&payload)
        .map_err(|e| MondrianError::CorruptModel(format!("cannot decode model: {e}")))
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

    /// Writes the model (versioned, checksummed; see [`crate::persist`]).
    fn save_to<W: Write>(&self, writer: W) -> Result<()> {
        save(self, Self::KIND, writer)
    }

    /// Reads a model written by [`save_to`](Self::save_to); a corrupt, truncated, foreign
    /// or newer file is an error.
    fn load_from<R: Read>(reader: R) -> Result<Self> {
        load(Self::KIND, reader)
    }

    /// Saves to a file, crash-safe: a crash or a kill during the save leaves the file as
    /// it was or the whole new model, never a part ([`save_file`]).
    fn save(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        save_file(self, Self::KIND, path.as_ref())
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
