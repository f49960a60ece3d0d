//! Small Office documents written by the tests themselves (DOCX, PPTX, XLSX).
#![allow(dead_code)]

use std::io::Write;

use zip::write::SimpleFileOptions;

pub const W: &str = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";
pub const R: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";
pub const A: &str = "http://schemas.openxmlformats.org/drawingml/2006/main";
pub const P: &str = "http://schemas.openxmlformats.org/presentationml/2006/main";
pub const S: &str = "http://schemas.openxmlformats.org/spreadsheetml/2006/main";
pub const REL: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";
pub const PKG_RELS: &str = "http://schemas.openxmlformats.org/package/2006/relationships";

/// A ZIP package of `(name, content)` parts.
pub fn package(parts: &[(&str, String)]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, content) in parts {
        zip.start_file(*name, SimpleFileOptions::default())
            .expect("start entry");
        zip.write_all(content.as_bytes()).expect("write entry");
    }
    zip.finish().expect("finish zip").into_inner()
}

/// A relationships part: `(id, type suffix, target)`.
pub fn rels(items: &[(&str, &str, &str)]) -> String {
    let body: String = items
        .iter()
        .map(|(id, kind, target)| {
            format!(r#"<Relationship Id="{id}" Type="{REL}/{kind}" Target="{target}"/>"#)
        })
        .collect();
    format!(r#"<?xml version="1.0"?><Relationships xmlns="{PKG_RELS}">{body}</Relationships>"#)
}

pub fn core(title: &str, author: &str) -> String {
    format!(
        r#"<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{title}</dc:title><dc:creator>{author}</dc:creator></cp:coreProperties>"#
    )
}

pub fn para(style: Option<&str>, num: Option<(&str, u8)>, text: &str) -> String {
    let mut ppr = String::new();
    if let Some(s) = style {
        ppr.push_str(&format!(r#"<w:pStyle w:val="{s}"/>"#));
    }
    if let Some((id, lvl)) = num {
        ppr.push_str(&format!(
            r#"<w:numPr><w:ilvl w:val="{lvl}"/><w:numId w:val="{id}"/></w:numPr>"#
        ));
    }
    format!(r#"<w:p><w:pPr>{ppr}</w:pPr><w:r><w:t xml:space="preserve">{text}</w:t></w:r></w:p>"#)
}

pub fn docx() -> Vec<u8> {
    let styles = format!(
        r#"<w:styles xmlns:w="{W}">
<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/></w:style>
<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style>
<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style>
<w:style w:type="paragraph" w:styleId="berschrift2"><w:name w:val="Überschrift 2"/></w:style>
<w:style w:type="paragraph" w:styleId="Custom"><w:name w:val="My outline"/><w:pPr><w:outlineLvl w:val="2"/></w:pPr></w:style>
<w:style w:type="paragraph" w:styleId="ListBullet"><w:name w:val="List Bullet"/><w:basedOn w:val="Normal"/><w:pPr><w:numPr><w:numId w:val="1"/></w:numPr></w:pPr></w:style>
</w:styles>"#
    );
    let numbering = format!(
        r#"<w:numbering xmlns:w="{W}">
<w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/><w:lvlText w:val="•"/></w:lvl></w:abstractNum>
<w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl><w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="%2)"/></w:lvl></w:abstractNum>
<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>
<w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num>
</w:numbering>"#
    );
    let table = r#"<w:tbl>
<w:tr><w:tc><w:p><w:r><w:t>Name</w:t></w:r></w:p></w:tc><w:tc><w:tcPr><w:gridSpan w:val="2"/></w:tcPr><w:p><w:r><w:t>Scores</w:t></w:r></w:p></w:tc></w:tr>
<w:tr><w:tc><w:tcPr><w:vMerge w:val="restart"/></w:tcPr><w:p><w:r><w:t>Ann</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>1</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>2</w:t></w:r></w:p></w:tc></w:tr>
<w:tr><w:tc><w:tcPr><w:vMerge/></w:tcPr><w:p/></w:tc><w:tc><w:p><w:r><w:t>3</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>4</w:t></w:r></w:p></w:tc></w:tr>
</w:tbl>"#;
    // The same text box twice, as current Word writes it: DrawingML in the Choice,
    // VML in the Fallback. It must come out once.
    let text_box = format!(
        r#"<w:p><w:r><mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"><mc:Choice Requires="wps"><w:drawing><wp:anchor xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"><wp:extent cx="952500" cy="476250"/><wp:docPr id="5" name="Text Box 5"/><a:graphic xmlns:a="{A}"><a:graphicData><wps:wsp xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"><wps:txbx><w:txbxContent><w:p><w:r><w:t>Boxed remark</w:t></w:r></w:p></w:txbxContent></wps:txbx></wps:wsp></a:graphicData></a:graphic></wp:anchor></w:drawing></mc:Choice><mc:Fallback><w:pict><v:shape xmlns:v="urn:schemas-microsoft-com:vml"><v:textbox><w:txbxContent><w:p><w:r><w:t>Boxed remark</w:t></w:r></w:p></w:txbxContent></v:textbox></v:shape></w:pict></mc:Fallback></mc:AlternateContent></w:r></w:p>"#
    );
    let picture = format!(
        r#"<w:p><w:r><w:drawing><wp:inline xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"><wp:extent cx="1905000" cy="952500"/><wp:docPr id="7" name="Picture 7" descr="A duck on a lake"/><a:graphic xmlns:a="{A}"><a:graphicData><pic:pic xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture"><pic:blipFill><a:blip r:embed="rId9"/></pic:blipFill></pic:pic></a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>"#
    );
    let body = [
        para(Some("Title"), None, "Annual Report"),
        para(Some("Heading1"), None, "Introduction"),
        r#"<w:p><w:r><w:t xml:space="preserve">Body text with a note</w:t></w:r><w:r><w:footnoteReference w:id="2"/></w:r><w:r><w:t>.</w:t></w:r></w:p>"#
        .to_owned(),
        para(Some("ListBullet"), None, "First bullet"),
        para(None, Some(("1", 0)), "Second bullet"),
        para(None, Some(("2", 0)), "Step one"),
        para(None, Some(("2", 1)), "Detail"),
        para(None, Some(("2", 0)), "Step two"),
        para(Some("berschrift2"), None, "Zahlen"),
        table.to_owned(),
        text_box,
        r#"<w:p><w:r><w:t>End of page one</w:t><w:br w:type="page"/></w:r></w:p>"#.to_owned(),
        para(Some("Custom"), None, "Outline heading"),
        picture,
        r#"<w:sectPr><w:headerReference w:type="default" r:id="rId3"/><w:footerReference w:type="default" r:id="rId4"/><w:footerReference w:type="first" r:id="rId4"/></w:sectPr>"#
        .to_owned(),
    ]
    .concat();
    let document = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{W}" xmlns:r="{R}"><w:body>{body}</w:body></w:document>"#
    );
    package(&[
        (
            "_rels/.rels",
            rels(&[
                ("rId1", "officeDocument", "word/document.xml"),
                ("rId2", "metadata/core-properties", "docProps/core.xml"),
            ]),
        ),
        ("docProps/core.xml", core("Report 2024", "Ann Author")),
        ("word/document.xml", document),
        (
            "word/_rels/document.xml.rels",
            rels(&[
                ("rId1", "styles", "styles.xml"),
                ("rId2", "numbering", "numbering.xml"),
                ("rId3", "header", "header1.xml"),
                ("rId4", "footer", "footer1.xml"),
                ("rId5", "footnotes", "footnotes.xml"),
                ("rId9", "image", "media/image1.png"),
            ]),
        ),
        ("word/styles.xml", styles),
        ("word/numbering.xml", numbering),
        (
            "word/header1.xml",
            format!(
                r#"<w:hdr xmlns:w="{W}"><w:p><w:r><w:t>Company Confidential</w:t></w:r></w:p></w:hdr>"#
            ),
        ),
        (
            "word/footer1.xml",
            format!(r#"<w:ftr xmlns:w="{W}"><w:p><w:r><w:t>Page footer</w:t></w:r></w:p></w:ftr>"#),
        ),
        (
            "word/footnotes.xml",
            format!(
                r#"<w:footnotes xmlns:w="{W}"><w:footnote w:type="separator" w:id="0"><w:p><w:r><w:separator/></w:r></w:p></w:footnote><w:footnote w:id="2"><w:p><w:r><w:t>Source: the archive.</w:t></w:r></w:p></w:footnote></w:footnotes>"#
            ),
        ),
    ])
}

pub fn slide(shapes: &str) -> String {
    format!(
        r#"<p:sld xmlns:p="{P}" xmlns:a="{A}" xmlns:r="{R}"><p:cSld><p:spTree>{shapes}</p:spTree></p:cSld></p:sld>"#
    )
}

pub fn shape(ph: Option<&str>, paragraphs: &str) -> String {
    let ph = match ph {
        Some("") => "<p:ph idx=\"1\"/>".to_owned(),
        Some(t) => format!(r#"<p:ph type="{t}"/>"#),
        None => String::new(),
    };
    format!(
        r#"<p:sp><p:nvSpPr><p:cNvPr id="2" name="s"/><p:cNvSpPr/><p:nvPr>{ph}</p:nvPr></p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/>{paragraphs}</p:txBody></p:sp>"#
    )
}

pub fn a_p(ppr: &str, text: &str) -> String {
    format!(r#"<a:p>{ppr}<a:r><a:t>{text}</a:t></a:r></a:p>"#)
}

pub fn pptx() -> Vec<u8> {
    let table = r#"<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="4" name="t"/><p:cNvGraphicFramePr/><p:nvPr/></p:nvGraphicFramePr><p:xfrm><a:off x="0" y="0"/><a:ext cx="952500" cy="952500"/></p:xfrm><a:graphic><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/table"><a:tbl><a:tr><a:tc gridSpan="2"><a:txBody><a:p><a:r><a:t>Region</a:t></a:r></a:p></a:txBody></a:tc><a:tc hMerge="1"><a:txBody><a:p/></a:txBody></a:tc></a:tr><a:tr><a:tc><a:txBody><a:p><a:r><a:t>North</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>12</a:t></a:r></a:p></a:txBody></a:tc></a:tr></a:tbl></a:graphicData></a:graphic></p:graphicFrame>"#;
    let picture = r#"<p:pic><p:nvPicPr><p:cNvPr id="5" name="Picture 4" descr="Sales chart photo"/><p:cNvPicPr/><p:nvPr/></p:nvPicPr><p:blipFill><a:blip r:embed="rId3"/></p:blipFill><p:spPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="952500" cy="476250"/></a:xfrm></p:spPr></p:pic>"#;
    let first = slide(
        &[
            shape(Some("title"), &a_p("", "Quarterly review")),
            shape(
                Some(""),
                &[
                    a_p("", "Revenue grew"),
                    a_p(r#"<a:pPr lvl="1"/>"#, "mostly abroad"),
                    a_p(r#"<a:pPr><a:buNone/></a:pPr>"#, "Plain remark"),
                ]
                .concat(),
            ),
            format!(
                r#"<p:grpSp><p:nvGrpSpPr><p:cNvPr id="9" name="g"/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>{}</p:grpSp>"#,
                shape(None, &a_p("", "Grouped note"))
            ),
            shape(
                None,
                &[
                    a_p(r#"<a:pPr><a:buAutoNum type="arabicPeriod"/></a:pPr>"#, "Plan"),
                    a_p(r#"<a:pPr><a:buAutoNum type="arabicPeriod"/></a:pPr>"#, "Act"),
                ]
                .concat(),
            ),
            shape(Some("sldNum"), &a_p("", "1")),
            table.to_owned(),
            picture.to_owned(),
        ]
        .concat(),
    );
    let second = slide(&shape(Some("ctrTitle"), &a_p("", "Thanks")));
    let notes = format!(
        r#"<p:notes xmlns:p="{P}" xmlns:a="{A}"><p:cSld><p:spTree>{}{}</p:spTree></p:cSld></p:notes>"#,
        shape(Some("sldImg"), ""),
        shape(Some("body"), &a_p("", "Mention the new office."))
    );
    let presentation = format!(
        r#"<p:presentation xmlns:p="{P}" xmlns:r="{R}"><p:sldIdLst><p:sldId id="256" r:id="rId2"/><p:sldId id="257" r:id="rId1"/></p:sldIdLst></p:presentation>"#
    );
    // Presentation order is sldIdLst order, not file names: slide9 comes first.
    package(&[
        (
            "_rels/.rels",
            rels(&[("rId1", "officeDocument", "ppt/presentation.xml")]),
        ),
        ("ppt/presentation.xml", presentation),
        (
            "ppt/_rels/presentation.xml.rels",
            rels(&[
                ("rId1", "slide", "slides/slide1.xml"),
                ("rId2", "slide", "slides/slide9.xml"),
            ]),
        ),
        ("ppt/slides/slide9.xml", first),
        (
            "ppt/slides/_rels/slide9.xml.rels",
            rels(&[
                ("rId2", "notesSlide", "../notesSlides/notesSlide1.xml"),
                ("rId3", "image", "../media/image1.png"),
            ]),
        ),
        ("ppt/media/image1.png", "not really a png".to_owned()),
        ("ppt/notesSlides/notesSlide1.xml", notes),
        ("ppt/slides/slide1.xml", second),
    ])
}

pub fn xlsx() -> Vec<u8> {
    package(&xlsx_parts())
}

/// A macro-enabled workbook: the workbook of [`xlsx`] with a VBA project part, whose
/// macros are never run.
pub fn xlsm() -> Vec<u8> {
    let mut parts = xlsx_parts();
    parts.push((
        "xl/vbaProject.bin",
        "Attribute VB_Name = \"Module1\"\nSub Boom()\nEnd Sub".to_owned(),
    ));
    package(&parts)
}

fn xlsx_parts() -> Vec<(&'static str, String)> {
    let workbook = format!(
        r#"<workbook xmlns="{S}" xmlns:r="{R}"><sheets><sheet name="Sales" sheetId="1" r:id="rId1"/><sheet name="Notes" sheetId="2" r:id="rId2"/></sheets></workbook>"#
    );
    let shared = format!(
        r#"<sst xmlns="{S}" count="4" uniqueCount="4"><si><t>Item</t></si><si><t>Qty</t></si><si><t>Total</t></si><si><t>Widget</t></si></sst>"#
    );
    let styles = format!(
        r#"<styleSheet xmlns="{S}"><cellXfs count="2"><xf numFmtId="0"/><xf numFmtId="14" applyNumberFormat="1"/></cellXfs></styleSheet>"#
    );
    // Data starts at B3 (empty rows and columns around it); C4 is a formula with its
    // cached value; D4 a date serial formatted as a date; row 6 a note after a gap.
    let sales = format!(
        r#"<worksheet xmlns="{S}"><sheetData>
<row r="3"><c r="B3" t="s"><v>0</v></c><c r="C3" t="s"><v>1</v></c><c r="D3" t="s"><v>2</v></c></row>
<row r="4"><c r="B4" t="s"><v>3</v></c><c r="C4"><f>2*2</f><v>4</v></c><c r="D4" s="1"><v>45292</v></c></row>
<row r="6"><c r="B6" t="inlineStr"><is><t>Checked by Ann</t></is></c></row>
</sheetData></worksheet>"#
    );
    let notes = format!(
        r#"<worksheet xmlns="{S}"><sheetData><row r="1"><c r="A1"><v>1.5</v></c><c r="B1" t="b"><v>1</v></c></row><row r="2"><c r="A2"><v>2</v></c><c r="B2" t="e"><v>#DIV/0!</v></c></row></sheetData></worksheet>"#
    );
    vec![
        (
            "_rels/.rels",
            rels(&[("rId1", "officeDocument", "xl/workbook.xml")]),
        ),
        ("xl/workbook.xml", workbook),
        (
            "xl/_rels/workbook.xml.rels",
            rels(&[
                ("rId1", "worksheet", "worksheets/sheet1.xml"),
                ("rId2", "worksheet", "worksheets/sheet2.xml"),
                ("rId3", "sharedStrings", "sharedStrings.xml"),
                ("rId4", "styles", "styles.xml"),
            ]),
        ),
        ("xl/sharedStrings.xml", shared),
        ("xl/styles.xml", styles),
        ("xl/worksheets/sheet1.xml", sales),
        ("xl/worksheets/sheet2.xml", notes),
    ]
}
