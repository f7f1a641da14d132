//! JSON answers, written by a serde serializer of our own that writes exactly what
//! `serde_json::to_writer` writes, only sooner.
//!
//! serde_json checks every byte of every string against its escape table, one at a
//! time: in the `gateway-instructions` dumps (`docs/benchmarks.md`) its string writer
//! cost about 13 instructions a byte, 3,600 of a pop's 74,000, and 700 more for the
//! 55-byte `traceparent` a traced job carries. The strings qlessd answers with (names,
//! ids, keys, timestamps) almost never need escaping, so here a string is checked
//! eight bytes at a time (each word tested at once for all three kinds of byte that
//! need escaping), then copied whole; one that needs escaping is written by serde_json
//! itself. Everything else is written as serde_json
//! writes it: numbers through its `CompactFormatter`, raw JSON (`RawValue`, a job's
//! data) as it is. The tests compare the two writers byte for byte.

use serde::Serialize;
use serde::ser::{self, Impossible};
use serde_json::Error;
use serde_json::ser::{CompactFormatter, Formatter};

/// The struct name serde_json's `RawValue` serializes itself under (one field of the
/// same name, holding the JSON text), for serializers to write it as it is. A test
/// checks that a `RawValue` still comes out raw.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Appends `value` as compact JSON to `out`.
pub(super) fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), Error> {
    value.serialize(&mut Writer { out })
}

/// The serializer: writes into a `Vec`, which cannot fail, so the only errors are
/// values JSON cannot hold (a map key that is not a string or a number).
struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

/// Whether serde_json would escape any of `bytes`: a quote, a backslash or a control
/// character. Eight bytes at a time, each word tested for all three at once; most
/// texts written are keys and names shorter than that, tested as one word too.
fn needs_escape(bytes: &[u8]) -> bool {
    let len = bytes.len();
    if len < 4 {
        return bytes
            .iter()
            .any(|&byte| byte < 0x20 || byte == b'"' || byte == b'\\');
    }
    if len < 8 {
        // The first four bytes and the last four (overlapping when fewer than eight).
        let half_at = |at: usize| {
            let mut half = [0; 4];
            half.copy_from_slice(&bytes[at..at + 4]);
            u64::from(u32::from_le_bytes(half))
        };
        return escapes_in(half_at(0) | half_at(len - 4) << 32) != 0;
    }
    let word_at = |at: usize| {
        let mut word = [0; 8];
        word.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(word)
    };
    // The last eight bytes (overlapping the words before when the length is not a
    // multiple of eight), then every whole word.
    let mut found = escapes_in(word_at(len - 8));
    let mut at = 0;
    while at + 8 <= len {
        found |= escapes_in(word_at(at));
        at += 8;
    }
    found != 0
}

/// Nonzero when any byte of `word` is below 0x20, a quote or a backslash. A byte
/// below `n` (at most 0x80) is one whose `byte - n` borrows while its own top bit is
/// clear; a byte equal to `c` is one where `byte ^ c` is below 1. A borrow carried
/// into the next byte only ever follows a byte that matched, so the answer is exact.
fn escapes_in(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const TOPS: u64 = 0x8080_8080_8080_8080;
    let below = |word: u64, n: u8| word.wrapping_sub(ONES * n as u64) & !word;
    let quote = word ^ (ONES * b'"' as u64);
    let backslash = word ^ (ONES * b'\\' as u64);
    (below(word, 0x20) | below(quote, 1) | below(backslash, 1)) & TOPS
}

impl Writer<'_> {
    fn string(&mut self, text: &str) -> Result<(), Error> {
        if needs_escape(text.as_bytes()) {
            return serde_json::to_writer(&mut *self.out, text);
        }
        self.out.reserve(text.len() + 2);
        self.out.push(b'"');
        self.out.extend_from_slice(text.as_bytes());
        self.out.push(b'"');
        Ok(())
    }

    /// A number through serde_json's formatter (writing to a `Vec` cannot fail).
    fn number(&mut self, write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) {
        write(self.out).expect("writing to a Vec");
    }
}

impl<'w, 'a> ser::Serializer for &'w mut Writer<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'w, 'a>;
    type SerializeTuple = Compound<'w, 'a>;
    type SerializeTupleStruct = Compound<'w, 'a>;
    type SerializeTupleVariant = Compound<'w, 'a>;
    type SerializeMap = Compound<'w, 'a>;
    type SerializeStruct = Compound<'w, 'a>;
    type SerializeStructVariant = Compound<'w, 'a>;

    fn serialize_bool(self, value: bool) -> Result<(), Error> {
        self.out
            .extend_from_slice(if value { b"true" } else { b"false" });
        Ok(())
    }

    fn serialize_i8(self, value: i8) -> Result<(), Error> {
        self.serialize_i64(i64::from(value))
    }

    fn serialize_i16(self, value: i16) -> Result<(), Error> {
        self.serialize_i64(i64::from(value))
    }

    fn serialize_i32(self, value: i32) -> Result<(), Error> {
        self.serialize_i64(i64::from(value))
    }

    fn serialize_i64(self, value: i64) -> Result<(), Error> {
        self.number(|out| CompactFormatter.write_i64(out, value));
        Ok(())
    }

    fn serialize_i128(self, value: i128) -> Result<(), Error> {
        self.number(|out| CompactFormatter.write_i128(out, value));
        Ok(())
    }

    fn serialize_u8(self, value: u8) -> Result<(), Error> {
        self.serialize_u64(u64::from(value))
    }

    fn serialize_u16(self, value: u16) -> Result<(), Error> {
        self.serialize_u64(u64::from(value))
    }

    fn serialize_u32(self, value: u32) -> Result<(), Error> {
        self.serialize_u64(u64::from(value))
    }

    fn serialize_u64(self, value: u64) -> Result<(), Error> {
        self.number(|out| CompactFormatter.write_u64(out, value));
        Ok(())
    }

    fn serialize_u128(self, value: u128) -> Result<(), Error> {
        self.number(|out| CompactFormatter.write_u128(out, value));
        Ok(())
    }

    /// As serde_json: `null` for a NaN or an infinity, which JSON cannot write.
    fn serialize_f32(self, value: f32) -> Result<(), Error> {
        if !value.is_finite() {
            return self.serialize_unit();
        }
        self.number(|out| CompactFormatter.write_f32(out, value));
        Ok(())
    }

    fn serialize_f64(self, value: f64) -> Result<(), Error> {
        if !value.is_finite() {
            return self.serialize_unit();
        }
        self.number(|out| CompactFormatter.write_f64(out, value));
        Ok(())
    }

    fn serialize_char(self, value: char) -> Result<(), Error> {
        self.string(value.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(self, value: &str) -> Result<(), Error> {
        self.string(value)
    }

    /// As serde_json: an array of the bytes' values.
    fn serialize_bytes(self, value: &[u8]) -> Result<(), Error> {
        use ser::SerializeSeq;
        let mut seq = self.serialize_seq(Some(value.len()))?;
        for byte in value {
            seq.serialize_element(byte)?;
        }
        seq.end()
    }

    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.string(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }

    /// `{"variant":value}`.
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.out.push(b'{');
        self.string(variant)?;
        self.out.push(b':');
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'w, 'a>, Error> {
        self.out.push(b'[');
        Ok(Compound::new(self, b"]"))
    }

    fn serialize_tuple(self, len: usize) -> Result<Compound<'w, 'a>, Error> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'w, 'a>, Error> {
        self.serialize_seq(Some(len))
    }

    /// `{"variant":[...]}`.
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'w, 'a>, Error> {
        self.out.push(b'{');
        self.string(variant)?;
        self.out.extend_from_slice(b":[");
        Ok(Compound::new(self, b"]}"))
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'w, 'a>, Error> {
        self.out.push(b'{');
        Ok(Compound::new(self, b"}"))
    }

    /// An object, or, for serde_json's `RawValue`, its JSON text as it is.
    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Compound<'w, 'a>, Error> {
        if name == RAW_VALUE_TOKEN {
            return Ok(Compound::raw(self));
        }
        self.serialize_map(Some(len))
    }

    /// `{"variant":{...}}`.
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'w, 'a>, Error> {
        self.out.push(b'{');
        self.string(variant)?;
        self.out.extend_from_slice(b":{");
        Ok(Compound::new(self, b"}}"))
    }
}

/// An array or object being written: a comma before every item but the first, and
/// its closing bytes at the end.
struct Compound<'w, 'a> {
    writer: &'w mut Writer<'a>,
    first: bool,
    close: &'static [u8],
    /// A `RawValue`: its one field is written as it is, with no key.
    raw: bool,
}

impl<'w, 'a> Compound<'w, 'a> {
    fn new(writer: &'w mut Writer<'a>, close: &'static [u8]) -> Self {
        Compound {
            writer,
            first: true,
            close,
            raw: false,
        }
    }

    fn raw(writer: &'w mut Writer<'a>) -> Self {
        Compound {
            writer,
            first: true,
            close: b"",
            raw: true,
        }
    }

    fn separate(&mut self) {
        if !std::mem::replace(&mut self.first, false) {
            self.writer.out.push(b',');
        }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.separate();
        value.serialize(&mut *self.writer)
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Error> {
        if self.raw {
            return value.serialize(RawText {
                out: &mut *self.writer.out,
            });
        }
        self.separate();
        self.writer.string(key)?;
        self.writer.out.push(b':');
        value.serialize(&mut *self.writer)
    }

    fn close(self) -> Result<(), Error> {
        self.writer.out.extend_from_slice(self.close);
        Ok(())
    }
}

impl ser::SerializeSeq for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }

    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

impl ser::SerializeTuple for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }

    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

impl ser::SerializeTupleStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }

    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

impl ser::SerializeTupleVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }

    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.separate();
        key.serialize(MapKey {
            writer: &mut *self.writer,
        })?;
        self.writer.out.push(b':');
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut *self.writer)
    }

    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.field(key, value)
    }

    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.field(key, value)
    }

    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

fn key_must_be_a_string() -> Error {
    ser::Error::custom("key must be a string")
}

/// A map key: a string, or, as serde_json writes them, a number, a character or a
/// boolean in quotes.
struct MapKey<'w, 'a> {
    writer: &'w mut Writer<'a>,
}

impl MapKey<'_, '_> {
    fn quoted(self, write: impl FnOnce(&mut Writer<'_>) -> Result<(), Error>) -> Result<(), Error> {
        self.writer.out.push(b'"');
        write(self.writer)?;
        self.writer.out.push(b'"');
        Ok(())
    }
}

impl ser::Serializer for MapKey<'_, '_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_str(self, value: &str) -> Result<(), Error> {
        self.writer.string(value)
    }

    fn serialize_char(self, value: char) -> Result<(), Error> {
        self.writer.string(value.encode_utf8(&mut [0; 4]))
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.writer.string(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_bool(self, value: bool) -> Result<(), Error> {
        self.quoted(|writer| ser::Serializer::serialize_bool(writer, value))
    }

    fn serialize_i8(self, value: i8) -> Result<(), Error> {
        self.serialize_i64(i64::from(value))
    }

    fn serialize_i16(self, value: i16) -> Result<(), Error> {
        self.serialize_i64(i64::from(value))
    }

    fn serialize_i32(self, value: i32) -> Result<(), Error> {
        self.serialize_i64(i64::from(value))
    }

    fn serialize_i64(self, value: i64) -> Result<(), Error> {
        self.quoted(|writer| ser::Serializer::serialize_i64(writer, value))
    }

    fn serialize_i128(self, value: i128) -> Result<(), Error> {
        self.quoted(|writer| ser::Serializer::serialize_i128(writer, value))
    }

    fn serialize_u8(self, value: u8) -> Result<(), Error> {
        self.serialize_u64(u64::from(value))
    }

    fn serialize_u16(self, value: u16) -> Result<(), Error> {
        self.serialize_u64(u64::from(value))
    }

    fn serialize_u32(self, value: u32) -> Result<(), Error> {
        self.serialize_u64(u64::from(value))
    }

    fn serialize_u64(self, value: u64) -> Result<(), Error> {
        self.quoted(|writer| ser::Serializer::serialize_u64(writer, value))
    }

    fn serialize_u128(self, value: u128) -> Result<(), Error> {
        self.quoted(|writer| ser::Serializer::serialize_u128(writer, value))
    }

    /// As serde_json: a finite float in quotes.
    fn serialize_f32(self, value: f32) -> Result<(), Error> {
        if !value.is_finite() {
            return Err(ser::Error::custom("float key must be finite"));
        }
        self.quoted(|writer| ser::Serializer::serialize_f32(writer, value))
    }

    fn serialize_f64(self, value: f64) -> Result<(), Error> {
        if !value.is_finite() {
            return Err(ser::Error::custom("float key must be finite"));
        }
        self.quoted(|writer| ser::Serializer::serialize_f64(writer, value))
    }

    fn serialize_bytes(self, _value: &[u8]) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_none(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_unit(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_must_be_a_string())
    }
}

/// The field of a `RawValue`: JSON text, written as it is.
struct RawText<'a> {
    out: &'a mut Vec<u8>,
}

fn not_raw_json() -> Error {
    ser::Error::custom("expected a RawValue's JSON text")
}

impl ser::Serializer for RawText<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_str(self, value: &str) -> Result<(), Error> {
        self.out.extend_from_slice(value.as_bytes());
        Ok(())
    }

    fn serialize_bool(self, _value: bool) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_i64(self, _value: i64) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_u64(self, _value: u64) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_f64(self, _value: f64) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_i8(self, _value: i8) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_i16(self, _value: i16) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_i32(self, _value: i32) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_u8(self, _value: u8) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_u16(self, _value: u16) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_u32(self, _value: u32) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_f32(self, _value: f32) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_char(self, _value: char) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_bytes(self, _value: &[u8]) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_none(self) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_unit(self) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
    ) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _value: &T,
    ) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Error> {
        Err(not_raw_json())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(not_raw_json())
    }

    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(not_raw_json())
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(not_raw_json())
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(not_raw_json())
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(not_raw_json())
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Error> {
        Err(not_raw_json())
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(not_raw_json())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;
    use serde_json::json;
    use serde_json::value::RawValue;

    /// Asserts that `value` is written exactly as serde_json writes it.
    #[track_caller]
    fn same<T: Serialize + ?Sized>(value: &T) {
        let mut ours = Vec::new();
        super::write(&mut ours, value).expect("written");
        let theirs = serde_json::to_vec(value).expect("written by serde_json");
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs)
        );
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        for byte in 0..=0x7fu8 {
            same(&char::from(byte).to_string());
            same(&format!("ab{}cd", char::from(byte)));
            same(&char::from(byte));
        }
        for text in [
            "",
            "plain",
            "a\"b\\c\nd\u{1f}\u{7f}",
            "é日本🦀/</script>",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            &"x".repeat(100),
            &format!("{}\t", "x".repeat(100)),
            &format!("\"{}", "x".repeat(33)),
        ] {
            same(text);
            same(&BTreeMap::from([(text, text)]));
        }
    }

    /// The word-at-a-time test against the plain definition: every byte value at every
    /// place of short and long texts, beside bytes that could carry a borrow.
    #[test]
    fn the_word_test_finds_exactly_the_bytes_to_escape() {
        let plain = |bytes: &[u8]| {
            bytes
                .iter()
                .any(|&byte| byte < 0x20 || byte == b'"' || byte == b'\\')
        };
        for len in 1..=24 {
            for at in 0..len {
                for byte in 0..=255u8 {
                    for neighbour in [b'a', 0x00, 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x80, 0xff] {
                        let mut bytes = vec![b'a'; len];
                        bytes[at] = byte;
                        if at + 1 < len {
                            bytes[at + 1] = neighbour;
                        }
                        assert_eq!(super::needs_escape(&bytes), plain(&bytes), "{bytes:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn numbers_are_written_as_serde_json_writes_them() {
        same(&[i64::MIN, -1, 0, 1, i64::MAX]);
        same(&[u64::MAX, 0]);
        same(&[i8::MIN as i32, i16::MAX as i32]);
        same(&[i128::MIN, i128::MAX]);
        same(&[u128::MAX]);
        same(&[
            0.0,
            -0.0,
            0.1,
            1.5e-7,
            1e300,
            1e16,
            123456789.125,
            f64::MAX,
            f64::MIN_POSITIVE,
        ]);
        same(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY]);
        same(&[0.1f32, 1e30, f32::NAN]);
        same(&json!([1, -2, 2.5, 1e100]));
    }

    #[derive(Serialize)]
    struct Unit;

    #[derive(Serialize)]
    struct Pair(u8, &'static str);

    #[derive(Serialize)]
    struct Wrapper(&'static str);

    #[derive(Serialize)]
    enum Shape {
        Empty,
        Named(&'static str),
        Tuple(u8, u8),
        Struct { a: u8, b: Option<bool> },
    }

    #[derive(Serialize)]
    struct Everything {
        unit: (),
        unit_struct: Unit,
        pair: Pair,
        wrapper: Wrapper,
        shapes: Vec<Shape>,
        none: Option<u8>,
        some: Option<&'static str>,
        empty_list: Vec<u8>,
        empty_map: BTreeMap<String, u8>,
        flag: bool,
        letter: char,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        #[serde(flatten)]
        extra: BTreeMap<String, serde_json::Value>,
    }

    /// Bytes as serde's `serialize_bytes` hands them.
    struct Bytes(&'static [u8]);

    impl Serialize for Bytes {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_bytes(self.0)
        }
    }

    #[test]
    fn every_shape_serde_has_is_written_as_serde_json_writes_it() {
        same(&Everything {
            unit: (),
            unit_struct: Unit,
            pair: Pair(7, "seven"),
            wrapper: Wrapper("inside"),
            shapes: vec![
                Shape::Empty,
                Shape::Named("n\"x"),
                Shape::Tuple(1, 2),
                Shape::Struct { a: 3, b: None },
            ],
            none: None,
            some: Some("yes"),
            empty_list: Vec::new(),
            empty_map: BTreeMap::new(),
            flag: true,
            letter: '\n',
            skipped: None,
            extra: BTreeMap::from([("more".to_owned(), json!({"x": [null, false]}))]),
        });
        same(&Bytes(b"\x00\x01\xff"));
        same(&(1, "two", 3.5));
        same(&BTreeMap::from([(1, "one"), (-2, "minus two")]));
        same(&BTreeMap::from([(true, 1), (false, 0)]));
        same(&BTreeMap::from([('k', 1)]));
        same(&BTreeMap::from([(u64::MAX, 1)]));
    }

    #[test]
    fn a_key_that_is_not_a_string_or_a_number_is_an_error_as_in_serde_json() {
        let map = BTreeMap::from([(vec![1], 1)]);
        assert!(super::write(&mut Vec::new(), &map).is_err());
        assert!(serde_json::to_vec(&map).is_err());
    }

    #[test]
    fn raw_json_is_written_as_it_is() {
        let raw = RawValue::from_string("{ \"b\" : [1, 2.50],\n \"a\":\"\\u00e9\" }".to_owned())
            .expect("JSON");
        let mut ours = Vec::new();
        super::write(&mut ours, &raw).expect("written");
        assert_eq!(ours, raw.get().as_bytes());
        same(&raw);
        same(&BTreeMap::from([("data", &raw)]));
        same(&vec![raw.clone(), raw]);
    }

    /// Random JSON values (strings drawn from characters that need escaping and that
    /// do not) come out as serde_json writes them.
    #[test]
    fn random_values_are_written_as_serde_json_writes_them() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |below: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        };
        const CHARS: &[char] = &[
            'a', 'Z', '0', ' ', '"', '\\', '\n', '\u{1}', '\u{1f}', 'é', '😀', '/',
        ];
        fn text(next: &mut impl FnMut(u64) -> u64) -> String {
            (0..next(40))
                .map(|_| CHARS[next(CHARS.len() as u64) as usize])
                .collect()
        }
        fn value(next: &mut impl FnMut(u64) -> u64, depth: u32) -> serde_json::Value {
            match next(if depth > 3 { 5 } else { 7 }) {
                0 => serde_json::Value::Null,
                1 => json!(next(2) == 1),
                2 => json!(next(u64::MAX) as i64),
                3 => json!(f64::from_bits(next(u64::MAX)) % 1e12),
                4 => json!(text(next)),
                5 => (0..next(5)).map(|_| value(next, depth + 1)).collect(),
                _ => {
                    let mut map = serde_json::Map::new();
                    for _ in 0..next(5) {
                        let key = text(next);
                        map.insert(key, value(next, depth + 1));
                    }
                    serde_json::Value::Object(map)
                }
            }
        }
        for _ in 0..2000 {
            same(&value(&mut next, 0));
        }
    }
}
