//! `#[derive(TaggedDeserialize)]`: `Deserialize` for an internally tagged enum
//! (`#[serde(tag = "…")]`) that reads the same wire format as serde's own derive, through a
//! `serde_json::Value`.
//!
//! Why: serde's derive reads an internally tagged enum by buffering the object in its private
//! `Content` and reading each variant's fields back out of it, so every type under such an
//! enum is compiled a second time, for that buffer. In the engine's WebAssembly that buffer's
//! copies were the largest single cost (DESIGN.md, "Dependencies"). This derive reads the
//! object as a JSON map, takes the tag out, and hands `{tag: rest}` to a private mirror of the
//! enum that serde derives externally tagged, read from the `Value`: the types under it are
//! compiled for `Value`, which every message the engine reads already goes through.
//!
//! The mirror has the enum's variants with their serde attributes and the container's serde
//! attributes except `tag`. A unit variant is mirrored as a newtype of `IgnoredAny` (so other
//! fields are ignored, as serde's internally tagged unit variants ignore them even under
//! `deny_unknown_fields`), and a struct
//! variant whose one field is `#[serde(flatten)]` as a newtype variant (what the flatten
//! reads is the rest of the object). `Serialize` stays serde's own derive.
//!
//! One difference, by design: serde's derive also reads a JSON array whose first item is the
//! tag (`["pair", "a", 3]`); this one reads objects only, which is all serde writes.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as Tokens;
use quote::{format_ident, quote};
use syn::punctuated::Punctuated;
use syn::{Attribute, Data, DeriveInput, Error, Expr, Fields, Lit, Meta, Token, parse_macro_input};

/// `Deserialize` for an internally tagged enum, through a `serde_json::Value` (see the crate).
#[proc_macro_derive(TaggedDeserialize, attributes(serde))]
pub fn tagged_deserialize(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(&input).unwrap_or_else(Error::into_compile_error).into()
}

fn serde_attrs(attrs: &[Attribute]) -> Vec<&Attribute> {
    attrs.iter().filter(|attr| attr.path().is_ident("serde")).collect()
}

/// The items of all the `#[serde(…)]` attributes in `attrs`, in order.
fn serde_metas(attrs: &[Attribute]) -> syn::Result<Vec<Meta>> {
    let mut metas = Vec::new();
    for attr in serde_attrs(attrs) {
        metas.extend(attr.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)?);
    }
    Ok(metas)
}

/// Whether a field is `#[serde(flatten)]`. A flattened field that is its variant's only one
/// becomes the mirror's newtype variant, where its other serde attributes would be lost: those
/// are refused.
fn is_flatten(attrs: &[Attribute]) -> syn::Result<bool> {
    let metas = serde_metas(attrs)?;
    if !metas.iter().any(|meta| meta.path().is_ident("flatten")) {
        return Ok(false);
    }
    if let Some(other) = metas.iter().find(|meta| !meta.path().is_ident("flatten")) {
        return Err(Error::new_spanned(
            other,
            "TaggedDeserialize: a flattened field's only serde attribute is flatten",
        ));
    }
    Ok(true)
}

fn expand(input: &DeriveInput) -> syn::Result<Tokens> {
    let Data::Enum(data) = &input.data else {
        return Err(Error::new_spanned(&input.ident, "TaggedDeserialize is for enums"));
    };
    if !input.generics.params.is_empty() {
        return Err(Error::new_spanned(&input.generics, "TaggedDeserialize takes no generics"));
    }
    let mut tag = None;
    let mut kept = Vec::new();
    for meta in serde_metas(&input.attrs)? {
        if meta.path().is_ident("tag") {
            let Meta::NameValue(pair) = &meta else {
                return Err(Error::new_spanned(meta, "expected tag = \"…\""));
            };
            let Expr::Lit(syn::ExprLit { lit: Lit::Str(name), .. }) = &pair.value else {
                return Err(Error::new_spanned(&pair.value, "expected a string"));
            };
            tag = Some(name.clone());
        } else if meta.path().is_ident("content") || meta.path().is_ident("untagged") {
            return Err(Error::new_spanned(meta, "TaggedDeserialize is for internal tags"));
        } else {
            kept.push(meta);
        }
    }
    let Some(tag) = tag else {
        return Err(Error::new_spanned(&input.ident, "TaggedDeserialize needs #[serde(tag = …)]"));
    };
    let name = &input.ident;
    let mut mirror = Vec::new();
    let mut arms = Vec::new();
    for variant in &data.variants {
        let ident = &variant.ident;
        let attrs = serde_attrs(&variant.attrs);
        match &variant.fields {
            Fields::Unit => {
                mirror.push(quote! { #(#attrs)* #ident(::serde::de::IgnoredAny) });
                arms.push(quote! { __Wire::#ident(_) => #name::#ident });
            }
            Fields::Unnamed(fields) => {
                if fields.unnamed.len() != 1 {
                    return Err(Error::new_spanned(variant, "an internally tagged tuple variant"));
                }
                let field = &fields.unnamed[0];
                let field_attrs = serde_attrs(&field.attrs);
                let ty = &field.ty;
                mirror.push(quote! { #(#attrs)* #ident(#(#field_attrs)* #ty) });
                arms.push(quote! { __Wire::#ident(inner) => #name::#ident(inner) });
            }
            Fields::Named(fields) => {
                let only = fields.named.len() == 1;
                if only && is_flatten(&fields.named[0].attrs)? {
                    let field = &fields.named[0];
                    let field_name = &field.ident;
                    let ty = &field.ty;
                    mirror.push(quote! { #(#attrs)* #ident(#ty) });
                    arms.push(
                        quote! { __Wire::#ident(inner) => #name::#ident { #field_name: inner } },
                    );
                    continue;
                }
                let names: Vec<_> = fields.named.iter().map(|field| &field.ident).collect();
                let bound: Vec<_> =
                    (0..names.len()).map(|at| format_ident!("__field{at}")).collect();
                let declared = fields.named.iter().map(|field| {
                    let field_attrs = serde_attrs(&field.attrs);
                    let field_name = &field.ident;
                    let ty = &field.ty;
                    quote! { #(#field_attrs)* #field_name: #ty }
                });
                mirror.push(quote! { #(#attrs)* #ident { #(#declared),* } });
                arms.push(quote! {
                    __Wire::#ident { #(#names: #bound),* } => #name::#ident { #(#names: #bound),* }
                });
            }
        }
    }
    let container = if kept.is_empty() {
        quote! {}
    } else {
        quote! { #[serde(#(#kept),*)] }
    };
    Ok(quote! {
        const _: () = {
            #[derive(::serde::Deserialize)]
            #container
            enum __Wire { #(#mirror),* }

            #[automatically_derived]
            impl<'de> ::serde::Deserialize<'de> for #name {
                fn deserialize<__D: ::serde::Deserializer<'de>>(
                    deserializer: __D,
                ) -> ::core::result::Result<Self, __D::Error> {
                    use ::serde::de::Error as _;
                    let mut map = <::serde_json::Map<::std::string::String, ::serde_json::Value>
                        as ::serde::Deserialize>::deserialize(deserializer)?;
                    let tag = match map.remove(#tag) {
                        ::core::option::Option::Some(::serde_json::Value::String(tag)) => tag,
                        ::core::option::Option::Some(_) => {
                            return ::core::result::Result::Err(__D::Error::custom(
                                ::core::concat!("`", #tag, "` is not a string"),
                            ));
                        }
                        ::core::option::Option::None => {
                            return ::core::result::Result::Err(__D::Error::missing_field(#tag));
                        }
                    };
                    let mut wire = ::serde_json::Map::new();
                    wire.insert(tag, ::serde_json::Value::Object(map));
                    let wire: __Wire = ::serde_json::from_value(::serde_json::Value::Object(wire))
                        .map_err(__D::Error::custom)?;
                    ::core::result::Result::Ok(match wire { #(#arms),* })
                }
            }
        };
    })
}
