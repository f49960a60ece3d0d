//! DOCX, PPTX and XLSX parsing on small packages the tests write themselves: headings
//! from styles, lists from numbering, tables with merged cells, text boxes, headers and
//! footers, footnotes, pictures, speaker notes, slide order, sheets, formulas, dates.

mod common;

use common::office::*;
use ragd::parse::{self, Block, BlockKind, Format, ParseError, ParseOptions, ParsedDocument};

fn parse_ok(format: &Format, bytes: &[u8]) -> ParsedDocument {
    parse::parse(format, bytes, &ParseOptions::default()).expect("the document parses")
}

fn texts(doc: &ParsedDocument, pred: impl Fn(&Block) -> bool) -> Vec<String> {
    doc.blocks
        .iter()
        .filter(|b| pred(b))
        .map(|b| b.text.clone())
        .collect()
}

#[test]
fn docx_structure_comes_through() {
    let doc = parse_ok(Format::named("docx"), &docx());
    assert_eq!(doc.title.as_deref(), Some("Report 2024"));
    assert_eq!(doc.author.as_deref(), Some("Ann Author"));
    let headings: Vec<(u8, String)> = doc
        .blocks
        .iter()
        .filter_map(|b| match b.kind {
            BlockKind::Heading(l) => Some((l, b.text.clone())),
            _ => None,
        })
        .collect();
    // The title sits above Heading 1, so every level moves down one.
    assert_eq!(
        headings,
        vec![
            (1, "Annual Report".to_owned()),
            (2, "Introduction".to_owned()),
            (3, "Zahlen".to_owned()),
            (4, "Outline heading".to_owned()),
        ]
    );
    let items = texts(&doc, |b| b.kind == BlockKind::ListItem);
    assert_eq!(
        items,
        [
            "First bullet",
            "Second bullet",
            "1. Step one",
            "a) Detail",
            "2. Step two"
        ]
    );
    let table = doc
        .blocks
        .iter()
        .find_map(|b| match &b.kind {
            BlockKind::Table(t) => Some(t.clone()),
            _ => None,
        })
        .expect("a table");
    assert_eq!(
        table.rows,
        vec![
            vec!["Name", "Scores", "Scores"],
            vec!["Ann", "1", "2"],
            vec!["Ann", "3", "4"],
        ]
    );
    let all = texts(&doc, |_| true);
    assert_eq!(all.iter().filter(|t| *t == "Boxed remark").count(), 1);
    assert!(all.contains(&"Body text with a note.".to_owned()));
    // Header first, footer (referenced twice) once at the end, then footnotes.
    assert_eq!(
        all.first().map(String::as_str),
        Some("Company Confidential")
    );
    assert_eq!(doc.blocks.first().map(|b| b.page), Some(1));
    assert_eq!(doc.blocks.last().map(|b| b.page), Some(2));
    assert_eq!(all.iter().filter(|t| *t == "Page footer").count(), 1);
    assert_eq!(all.last().map(String::as_str), Some("Source: the archive."));
    let image = doc
        .blocks
        .iter()
        .find_map(|b| match &b.kind {
            BlockKind::Image(i) => Some((i.clone(), b.page)),
            _ => None,
        })
        .expect("an image");
    assert_eq!((image.0.width, image.0.height), (200, 100));
    assert!(image.0.description.contains("A duck on a lake"));
    assert_eq!(image.0.description_source.as_str(), "image_size");
    // The explicit page break puts the picture on page 2, and leaves the text before
    // it on page 1.
    assert_eq!(image.1, 2);
    let before = doc.blocks.iter().find(|b| b.text == "End of page one");
    assert_eq!(before.map(|b| b.page), Some(1));
    assert_eq!(doc.pages, 2);
}

#[test]
fn strict_ooxml_reads_like_transitional() {
    let w = "http://purl.oclc.org/ooxml/wordprocessingml/main";
    let r = "http://purl.oclc.org/ooxml/officeDocument/relationships";
    let document = format!(
        r#"<w:document xmlns:w="{w}" xmlns:r="{r}" w:conformance="strict"><w:body><w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Strict heading</w:t></w:r></w:p><w:p><w:r><w:t>Strict body</w:t></w:r></w:p><w:sectPr><w:headerReference w:type="default" r:id="rId2"/></w:sectPr></w:body></w:document>"#
    );
    let strict_rels = |items: &[(&str, &str, &str)]| {
        let body: String = items
            .iter()
            .map(|(id, kind, target)| {
                format!(r#"<Relationship Id="{id}" Type="{r}/{kind}" Target="{target}"/>"#)
            })
            .collect();
        format!(r#"<Relationships xmlns="{PKG_RELS}">{body}</Relationships>"#)
    };
    let bytes = package(&[
        (
            "_rels/.rels",
            strict_rels(&[("rId1", "officeDocument", "word/document.xml")]),
        ),
        ("word/document.xml", document),
        (
            "word/_rels/document.xml.rels",
            strict_rels(&[
                ("rId1", "styles", "styles.xml"),
                ("rId2", "header", "header1.xml"),
            ]),
        ),
        (
            "word/styles.xml",
            format!(
                r#"<w:styles xmlns:w="{w}"><w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style></w:styles>"#
            ),
        ),
        (
            "word/header1.xml",
            format!(
                r#"<w:hdr xmlns:w="{w}"><w:p><w:r><w:t>Strict header</w:t></w:r></w:p></w:hdr>"#
            ),
        ),
    ]);
    let doc = parse_ok(Format::named("docx"), &bytes);
    assert_eq!(
        texts(&doc, |_| true),
        ["Strict header", "Strict heading", "Strict body"]
    );
    assert_eq!(doc.blocks[1].kind, BlockKind::Heading(1));
}

#[test]
fn pptx_slides_shapes_and_notes() {
    let doc = parse_ok(Format::named("pptx"), &pptx());
    assert_eq!(doc.pages, 2);
    let on = |page: u32| -> Vec<(String, String)> {
        doc.blocks
            .iter()
            .filter(|b| b.page == page)
            .map(|b| {
                let kind = match &b.kind {
                    BlockKind::Heading(l) => format!("h{l}"),
                    BlockKind::ListItem => "li".into(),
                    BlockKind::Paragraph => "p".into(),
                    BlockKind::Table(_) => "table".into(),
                    BlockKind::Image(_) => "image".into(),
                    BlockKind::Code => "code".into(),
                };
                (kind, b.text.clone())
            })
            .collect()
    };
    let first = on(1);
    let kinds: Vec<&str> = first.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        ["h1", "li", "li", "p", "p", "li", "li", "table", "image", "p"]
    );
    assert_eq!(first[0].1, "Quarterly review");
    assert_eq!(first[3].1, "Plain remark");
    assert_eq!(first[4].1, "Grouped note");
    assert_eq!(
        (first[5].1.as_str(), first[6].1.as_str()),
        ("1. Plan", "2. Act")
    );
    assert!(first[8].1.contains("Sales chart photo"));
    assert_eq!(first[9].1, "Mention the new office.");
    let table = doc
        .blocks
        .iter()
        .find_map(|b| match &b.kind {
            BlockKind::Table(t) => Some(t.rows.clone()),
            _ => None,
        })
        .expect("a table");
    assert_eq!(table, vec![vec!["Region", "Region"], vec!["North", "12"]]);
    assert_eq!(on(2), vec![("h1".to_owned(), "Thanks".to_owned())]);
}

#[test]
fn xlsx_sheets_become_pages_with_tables() {
    let doc = parse_ok(Format::named("xlsx"), &xlsx());
    assert_eq!(doc.pages, 2);
    let headings = texts(&doc, |b| matches!(b.kind, BlockKind::Heading(_)));
    assert_eq!(headings, ["Sales", "Notes"]);
    let tables: Vec<(u32, Vec<Vec<String>>)> = doc
        .blocks
        .iter()
        .filter_map(|b| match &b.kind {
            BlockKind::Table(t) => Some((b.page, t.rows.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        tables[0],
        (
            1,
            vec![
                vec!["Item".to_owned(), "Qty".into(), "Total".into()],
                vec!["Widget".into(), "4".into(), "2024-01-01".into()],
            ]
        )
    );
    assert_eq!(
        tables[1],
        (
            2,
            vec![
                vec!["1.5".to_owned(), "TRUE".into()],
                vec!["2".into(), "#DIV/0!".into()],
            ]
        )
    );
    // A lone cell after an empty row is a paragraph of its own, on the sheet's page.
    let lone = doc
        .blocks
        .iter()
        .find(|b| b.text == "Checked by Ann")
        .expect("the note");
    assert_eq!((lone.kind.clone(), lone.page), (BlockKind::Paragraph, 1));
}

#[test]
fn not_office_files_are_clear_errors() {
    let opts = ParseOptions::default();
    for format in [
        Format::named("docx"),
        Format::named("pptx"),
        Format::named("xlsx"),
    ] {
        assert!(matches!(
            parse::parse(format, b"plain text, not a package", &opts),
            Err(ParseError::Invalid(_))
        ));
        assert!(matches!(
            parse::parse(format, b"", &opts),
            Err(ParseError::Empty)
        ));
        // An encrypted Office file is an OLE compound file holding "EncryptedPackage".
        let mut ole = vec![0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
        ole.resize(512, 0);
        ole.extend("EncryptedPackage".encode_utf16().flat_map(u16::to_le_bytes));
        assert!(matches!(
            parse::parse(format, &ole, &opts),
            Err(ParseError::Encrypted)
        ));
        // A ZIP that is no Office package.
        let other = package(&[("hello.txt", "hi".to_owned())]);
        assert!(matches!(
            parse::parse(format, &other, &opts),
            Err(ParseError::Invalid(_))
        ));
    }
}

#[test]
fn a_package_of_the_wrong_kind_says_what_it_is() {
    let err = parse::parse(Format::named("pptx"), &docx(), &ParseOptions::default())
        .expect_err("a document is no presentation");
    assert!(
        err.to_string().contains("Word document"),
        "unhelpful error: {err}"
    );
    assert!(parse::parse(Format::named("xlsx"), &pptx(), &ParseOptions::default()).is_err());
    assert!(parse::parse(Format::named("docx"), &xlsx(), &ParseOptions::default()).is_err());
}

#[test]
fn a_document_without_text_is_empty() {
    let document = format!(r#"<w:document xmlns:w="{W}"><w:body><w:p/></w:body></w:document>"#);
    let bytes = package(&[
        (
            "_rels/.rels",
            rels(&[("rId1", "officeDocument", "word/document.xml")]),
        ),
        ("word/document.xml", document),
    ]);
    assert!(matches!(
        parse::parse(Format::named("docx"), &bytes, &ParseOptions::default()),
        Err(ParseError::Empty)
    ));
}
