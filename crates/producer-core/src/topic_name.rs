//! Kafka's rules for topic names, checked before a name is used or sent.

/// The longest topic name Kafka allows: 249 characters (`Topic.MAX_NAME_LENGTH`).
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Why a topic name breaks Kafka's rules; see [`check_topic_name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidTopicName {
    /// The name is empty.
    #[error("invalid topic name: it is empty")]
    Empty,
    /// The name is `.` or `..`.
    #[error("invalid topic name: it cannot be \".\" or \"..\"")]
    DotOrDotDot,
    /// The name is longer than [`MAX_TOPIC_NAME_LEN`]; the length in bytes (characters, for
    /// a name of allowed characters).
    #[error("invalid topic name: {0} bytes long, at most {MAX_TOPIC_NAME_LEN} are allowed")]
    TooLong(usize),
    /// The name holds a character other than ASCII letters, digits, `.`, `_` and `-`.
    #[error("invalid topic name: it holds {0:?} (only ASCII letters, digits, '.', '_' and '-' are allowed)")]
    IllegalCharacter(char),
}

/// Whether `name` is a topic name Kafka allows, by its rules (`Topic.validate` of Kafka's
/// clients, checked in the same order): not empty, not `.` or `..`, at most
/// [`MAX_TOPIC_NAME_LEN`] bytes, and only the characters `[a-zA-Z0-9._-]`.
/// [`crate::Producer::send`] refuses a record whose topic breaks them with
/// [`crate::SendErrorReason::InvalidTopic`], the first time it sees the name.
pub fn check_topic_name(name: &str) -> Result<(), InvalidTopicName> {
    if name.is_empty() {
        return Err(InvalidTopicName::Empty);
    }
    if name == "." || name == ".." {
        return Err(InvalidTopicName::DotOrDotDot);
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return Err(InvalidTopicName::TooLong(name.len()));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    match name.chars().find(|&c| !allowed(c)) {
        Some(c) => Err(InvalidTopicName::IllegalCharacter(c)),
        None => Ok(()),
    }
}
