# Builds dist\gpuws-<version>-windows-x64-setup.exe on Windows: freezes the app with PyInstaller,
# makes the .ico from the PNG renders, then compiles installer\windows\gpuws.iss with Inno Setup.
# Needs: Python 3.11+ on PATH as `py`, Inno Setup 6 (iscc.exe on PATH or in its default folder).
$ErrorActionPreference = "Stop"
$root = Resolve-Path "$PSScriptRoot\..\.."
Set-Location $root
$version = (Select-String -Path gpuws\__init__.py -Pattern '^__version__\s*=\s*"([^"]+)"').Matches[0].Groups[1].Value
py -m venv .venv-win
.\.venv-win\Scripts\python -m pip install -q -e ".[freeze]" pillow
New-Item -ItemType Directory -Force build | Out-Null
.\.venv-win\Scripts\python -c "from PIL import Image; Image.open('gpuws/resources/icons/gpuws-256.png').save('build/gpuws.ico', sizes=[(16,16),(24,24),(32,32),(48,48),(64,64),(128,128),(256,256)])"
.\.venv-win\Scripts\python -m PyInstaller packaging\gpuws.spec --noconfirm --distpath build\frozen --workpath build\pyinstaller
$iscc = (Get-Command iscc -ErrorAction SilentlyContinue).Source
if (-not $iscc) { $iscc = "${env:ProgramFiles(x86)}\Inno Setup 6\ISCC.exe" }
& $iscc "/DAppVersion=$version" installer\windows\gpuws.iss
if ($LASTEXITCODE -ne 0) { throw "iscc failed ($LASTEXITCODE)" }
Write-Host "dist\gpuws-$version-windows-x64-setup.exe"
