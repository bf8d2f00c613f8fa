#!/usr/bin/env bash
# Real photos for bench/quality.py, from two Debian wallpaper packages.
#
#   apt-get update                       # once, so that apt-get download finds them
#   bash bench/fetch_photos.sh [DIR]     # DIR defaults to bench/photos (git-ignored)
#
# Downloads the .debs with `apt-get download` into DIR/debs, unpacks them and
# copies 14 photos into DIR: landscapes, macro, water, sky, one black-and-white,
# all at least 1920 px wide, all sRGB or untagged (so colour management plays
# no part in the scores). Six carry EXIF Artist/Copyright tags and an embedded
# EXIF preview (IFD1), as the cameras and editors left them: the metadata case.
# DIR/SOURCES.tsv records each photo's package, version, path, author, licence
# and SHA-256. The images are never committed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="$(mkdir -p "${1:-$here/photos}" && cd "${1:-$here/photos}" && pwd)"
mkdir -p "$dest/debs"

# name <TAB> package <TAB> path in the package <TAB> author <TAB> licence
# (plasma: metadata.json beside each image says LGPLv3, debian/copyright GPL-2+;
# mate: debian/copyright, GPL-2+).
read -r -d '' PHOTOS <<'TABLE' || true
BytheWater	plasma-workspace-wallpapers	usr/share/wallpapers/BytheWater/contents/images/2560x1600.jpg	Maciej Wiklo	LGPL-3 (metadata.json), GPL-2+ (debian/copyright)
ColdRipple	plasma-workspace-wallpapers	usr/share/wallpapers/ColdRipple/contents/images/2560x1600.jpg	Risto Saukonpää	LGPL-3 (metadata.json), GPL-2+ (debian/copyright)
DarkestHour	plasma-workspace-wallpapers	usr/share/wallpapers/DarkestHour/contents/images/2560x1600.jpg	Risto Saukonpää	LGPL-3 (metadata.json), GPL-2+ (debian/copyright)
EveningGlow	plasma-workspace-wallpapers	usr/share/wallpapers/EveningGlow/contents/images/2560x1600.jpg	Ian Hex	LGPL-3 (metadata.json), GPL-2+ (debian/copyright)
FallenLeaf	plasma-workspace-wallpapers	usr/share/wallpapers/FallenLeaf/contents/images/2560x1600.jpg	Martin Klapetek	LGPL-3 (metadata.json), GPL-2+ (debian/copyright)
Grey	plasma-workspace-wallpapers	usr/share/wallpapers/Grey/contents/images/2560x1600.jpg	Sigi Sagi	LGPL-3 (metadata.json), GPL-2+ (debian/copyright)
Kite	plasma-workspace-wallpapers	usr/share/wallpapers/Kite/contents/images/2560x1600.jpg	Risto Saukonpää	LGPL-3 (metadata.json), GPL-2+ (debian/copyright)
OneStandsOut	plasma-workspace-wallpapers	usr/share/wallpapers/OneStandsOut/contents/images/2560x1600.jpg	Risto Saukonpää	LGPL-3 (metadata.json), GPL-2+ (debian/copyright)
Path	plasma-workspace-wallpapers	usr/share/wallpapers/Path/contents/images/2560x1600.jpg	Risto Saukonpää	LGPL-3 (metadata.json), GPL-2+ (debian/copyright)
summer_1am	plasma-workspace-wallpapers	usr/share/wallpapers/summer_1am/contents/images/2560x1600.jpg	Risto Saukonpää	LGPL-3 (metadata.json), GPL-2+ (debian/copyright)
Aqua	mate-backgrounds	usr/share/backgrounds/mate/nature/Aqua.jpg	Charles Barbin	GPL-2+ (debian/copyright)
LadyBird	mate-backgrounds	usr/share/backgrounds/mate/nature/LadyBird.jpg	Charles Barbin	GPL-2+ (debian/copyright)
Storm	mate-backgrounds	usr/share/backgrounds/mate/nature/Storm.jpg	Sergey Nazarov	GPL-2+ (debian/copyright)
TwoWings	mate-backgrounds	usr/share/backgrounds/mate/nature/TwoWings.jpg	Charles Barbin, Hylke Bons	GPL-2+ (debian/copyright)
TABLE

packages=(plasma-workspace-wallpapers mate-backgrounds)
cd "$dest/debs"
for package in "${packages[@]}"; do
    if ! ls "${package}"_*.deb >/dev/null 2>&1; then
        apt-get download "$package"
    fi
done

unpacked="$(mktemp -d)"
trap 'rm -rf "$unpacked"' EXIT
declare -A versions
for package in "${packages[@]}"; do
    deb="$(ls "${package}"_*.deb | head -n1)"
    versions[$package]="$(dpkg-deb -f "$deb" Version)"
    mkdir -p "$unpacked/$package"
    dpkg-deb -x "$deb" "$unpacked/$package"
done

sources="$dest/SOURCES.tsv"
printf 'photo\tpackage\tversion\tpath\tauthor\tlicence\tsha256\n' >"$sources"
while IFS=$'\t' read -r name package path author licence; do
    cp "$unpacked/$package/$path" "$dest/$name.jpg"
    sum="$(sha256sum "$dest/$name.jpg" | cut -d' ' -f1)"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name.jpg" "$package" "${versions[$package]}" \
        "$path" "$author" "$licence" "$sum" >>"$sources"
done <<<"$PHOTOS"
echo "$(($(wc -l <"$sources") - 1)) photos in $dest (see $sources)"
