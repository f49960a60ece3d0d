//! Files attached to a chat message: how many, how much of each, and how each is read
//! (the knowledge base's parsers with OCR on, nothing stored).

use super::Attachment;
use crate::assistant::{Assistant, AssistantError};
use crate::kb::parsing::ParseJob;
use crate::parse::clean::CleanOptions;
use crate::parse::{Format, TableMode};

/// Most files on one message.
pub const MAX_ATTACHMENTS: usize = 10;
/// Most characters of text one attachment adds to the turn.
pub const MAX_ATTACHMENT_CHARS: usize = 20_000;
/// Form fields a file may be attached under.
const FILE_FIELDS: &[&str] = &["files[]", "files", "file"];

impl Assistant {
    /// Reads the files of one message, in order; a file under another field name, or
    /// one that cannot be parsed, refuses the message.
    pub async fn attachments(
        &self,
        files: Vec<(String, String, Vec<u8>)>,
    ) -> Result<Vec<Attachment>, AssistantError> {
        if files.len() > MAX_ATTACHMENTS {
            return Err(AssistantError::BadRequest(format!(
                "at most {MAX_ATTACHMENTS} files can be attached to one message"
            )));
        }
        let mut out = Vec::with_capacity(files.len());
        for (field, filename, bytes) in files {
            if !FILE_FIELDS.contains(&field.as_str()) {
                return Err(AssistantError::BadRequest(format!(
                    "unexpected file field '{field}'; attach files as files[]"
                )));
            }
            out.push(self.attachment(filename, bytes).await?);
        }
        Ok(out)
    }

    /// One file's text by the knowledge base's parsers (OCR on for scans and images).
    async fn attachment(
        &self,
        filename: String,
        bytes: Vec<u8>,
    ) -> Result<Attachment, AssistantError> {
        let size = bytes.len() as u64;
        let is_image = Format::for_filename(&filename).is_ok_and(|f| f.image);
        let job = ParseJob {
            filename: filename.clone(),
            bytes,
            enable_ocr: true,
            table_mode: TableMode::Fast,
            clean: CleanOptions {
                remove_urls: false,
                normalize_arabic: true,
            },
            describe_images: true,
        };
        let parsed = self.kb.parse_file(job, true, true, false).await?;
        let text: String = parsed
            .llm_ready
            .chars()
            .take(MAX_ATTACHMENT_CHARS)
            .collect();
        Ok(Attachment {
            kind: if is_image { "image" } else { "document" }.into(),
            chars: text.chars().count(),
            filename,
            size,
            text,
        })
    }
}
